// The dashboard page's entry: the gallery first, then everything else.
//
// The first screen needs only the connection state and the gallery (this module's imports:
// auth.js, gallery.js, grid.js and what they use, 10 modules that index.html preloads). Its
// first page is asked for at once (boot.js even asks before the modules have loaded);
// views.js, which wires every other view (the composer, the lightbox, compare, dialogs,
// presets, system, team), is imported once the thumbnails on the screen have arrived (1.5 s
// at most), so its 20-odd modules do not queue in front of the gallery's requests on the
// browser's six connections (docs/dashboard.md, "How the page is built").

import { wireAuth } from "./auth.js";
import { gallery, wireGallery } from "./gallery.js";
import { grid } from "./grid.js";
import * as store from "./store.js";
import { $, describeError, toast } from "./ui.js";

let reloadAll = () => gallery.reset();

async function start() {
  wireAuth(() => reloadAll());
  wireGallery();
  grid.start();
  const first = gallery.reset();
  await first;
  await grid.firstScreen();
  try {
    const views = await import("./views.js");
    reloadAll = views.start(first);
  } catch (error) {
    toast(`The page could not be loaded completely: ${describeError(error)}`);
    return;
  }
  $("refresh-button").addEventListener("click", () => {
    store.set("paused", false);
    reloadAll();
  });
}

start();
