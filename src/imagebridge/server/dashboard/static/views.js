// Every view but the gallery's first screen, wired once app.js has asked for that screen.
//
// Views (one module each): the composer (composer.js controls, sources.js its images, mask.js
// the mask painter, run.js submission and the run it starts, presets.js, actions.js edit-this /
// vary / reuse); the gallery's selection bar (bulk.js), lightbox.js and compare.js;
// job_dialog.js, system.js and team.js. Shared values live in store.js, the bridge's limits in
// limits.js, form rules in form.js, checks.js and capabilities.js, the HTTP client in api.js /
// bridge.js. Modules that would otherwise import each other in a circle are joined here
// (connect()).

import { ApiError } from "./api.js";
import { wireActions } from "./actions.js";
import { wireBulk } from "./bulk.js";
import { wireCompare } from "./compare.js";
import { applyDynamicRules, forgetCapabilities, loadProviders, wireComposer, writeValues } from "./composer.js";
import { defaultValues } from "./form.js";
import { gallery } from "./gallery.js";
import { grid } from "./grid.js";
import { cancelJob } from "./job_actions.js";
import { jobDialog, wireJobDialog } from "./job_dialog.js";
import { lightbox, wireLightbox } from "./lightbox.js";
import { wireMask } from "./mask.js";
import { loadPresets, wirePresets } from "./presets.js";
import { run, wireRun } from "./run.js";
import { wireSources } from "./sources.js";
import { loadDiagnostics, openSystem, wireSystem } from "./system.js";
import { loadTeam, wireTeam } from "./team.js";
import { $, describeError, toast } from "./ui.js";

function wireDialogs() {
  for (const button of document.querySelectorAll("[data-close]")) {
    button.addEventListener("click", () => button.closest("dialog").close());
  }
}

const PROVIDER_RETRIES_MS = [1000, 2000, 4000, 8000, 16000];

/** The composer is unusable without providers: a load that failed (a request that timed out
 *  or was refused while the bridge was busy) is tried again a few times, backing off, rather
 *  than leaving an empty provider list until the next Refresh. */
async function loadProvidersPatiently(diagnostics) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await loadProviders(diagnostics);
    } catch (error) {
      const unauthorized = error instanceof ApiError && error.status === 401;
      if (unauthorized || attempt >= PROVIDER_RETRIES_MS.length) throw error;
      await new Promise((resolve) => setTimeout(resolve, PROVIDER_RETRIES_MS[attempt]));
    }
  }
}

/** Load everything from the bridge again; `gallery` is the gallery's load when it is already
 *  under way (the first one, which app.js started). */
async function loadAll(galleryLoad = null) {
  forgetCapabilities();
  const diagnostics = loadDiagnostics().catch(() => null);
  const results = await Promise.allSettled([loadProvidersPatiently(diagnostics), loadPresets(), galleryLoad || gallery.reset(), loadTeam()]);
  const failed = results.find((result) => result.status === "rejected");
  if (failed && !(failed.reason instanceof ApiError && failed.reason.status === 401)) {
    toast(`Some data could not be loaded: ${describeError(failed.reason)}`);
  }
  if ($("system-dialog").open) openSystem();
}

/** Wire every view and load what they show; returns what reloads everything. */
export function start(firstGalleryLoad) {
  grid.connect({ open: (key) => lightbox.open(key), openJob: (id) => jobDialog.open(id), cancel: (id) => cancelJob(id) });
  run.connect({ openImage: (id) => lightbox.openImage(id), openJob: (id) => jobDialog.open(id) });
  wireDialogs();
  wireComposer();
  wireSources();
  wireMask();
  wireRun();
  wireActions();
  wirePresets();
  wireBulk();
  wireLightbox();
  wireCompare();
  wireJobDialog();
  wireSystem();
  wireTeam();
  writeValues(defaultValues());
  applyDynamicRules();
  loadAll(firstGalleryLoad);
  return () => loadAll();
}
