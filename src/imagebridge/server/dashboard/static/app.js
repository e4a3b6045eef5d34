// The dashboard page's entry: wires every view, then loads everything from the bridge.
//
// Views (one module each): auth.js (connection, token); the composer (composer.js controls,
// sources.js its images, mask.js the mask painter, run.js submission and the run it starts,
// presets.js, actions.js edit-this / vary / reuse); the gallery (gallery.js data, grid.js
// tiles, selection.js and bulk.js the selection, lightbox.js, compare.js); job_dialog.js,
// system.js and team.js. Shared values live in store.js, the bridge's limits in limits.js,
// form rules in form.js, checks.js and capabilities.js, the HTTP client in api.js / bridge.js.
// Modules that would otherwise import each other in a circle are joined here (connect()).

import { ApiError } from "./api.js";
import { wireActions } from "./actions.js";
import { wireAuth } from "./auth.js";
import { wireBulk } from "./bulk.js";
import { wireCompare } from "./compare.js";
import { applyDynamicRules, forgetCapabilities, loadProviders, wireComposer, writeValues } from "./composer.js";
import { defaultValues } from "./form.js";
import { gallery, wireGallery } from "./gallery.js";
import { grid } from "./grid.js";
import { cancelJob } from "./job_actions.js";
import { jobDialog, wireJobDialog } from "./job_dialog.js";
import { lightbox, wireLightbox } from "./lightbox.js";
import { wireMask } from "./mask.js";
import { loadPresets, wirePresets } from "./presets.js";
import { run, wireRun } from "./run.js";
import { wireSources } from "./sources.js";
import * as store from "./store.js";
import { loadDiagnostics, openSystem, wireSystem } from "./system.js";
import { loadTeam, wireTeam } from "./team.js";
import { $, describeError, toast } from "./ui.js";

function wireDialogs() {
  for (const button of document.querySelectorAll("[data-close]")) {
    button.addEventListener("click", () => button.closest("dialog").close());
  }
}

async function reloadAll() {
  forgetCapabilities();
  const diagnostics = loadDiagnostics().catch(() => null);
  const results = await Promise.allSettled([loadProviders(diagnostics), loadPresets(), gallery.reset(), loadTeam()]);
  const failed = results.find((result) => result.status === "rejected");
  if (failed && !(failed.reason instanceof ApiError && failed.reason.status === 401)) {
    toast(`Some data could not be loaded: ${describeError(failed.reason)}`);
  }
  if ($("system-dialog").open) openSystem();
}

function start() {
  grid.connect({ open: (key) => lightbox.open(key), openJob: (id) => jobDialog.open(id), cancel: (id) => cancelJob(id) });
  run.connect({ openImage: (id) => lightbox.openImage(id), openJob: (id) => jobDialog.open(id) });
  wireDialogs();
  wireAuth(reloadAll);
  wireComposer();
  wireSources();
  wireMask();
  wireRun();
  wireActions();
  wirePresets();
  wireGallery();
  grid.start();
  wireBulk();
  wireLightbox();
  wireCompare();
  wireJobDialog();
  wireSystem();
  wireTeam();
  $("refresh-button").addEventListener("click", () => {
    store.set("paused", false);
    reloadAll();
  });
  writeValues(defaultValues());
  applyDynamicRules();
  reloadAll();
}

start();
