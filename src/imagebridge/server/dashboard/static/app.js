// The dashboard page's entry: wires every view, then loads everything from the bridge.
//
// Views (one module each): auth.js (connection, token), composer.js, presets.js,
// library.js, job_dialog.js, system.js, team.js (the admin's API keys). Shared values live in store.js, the bridge's
// limits in limits.js, form rules in form.js, the HTTP client in api.js / bridge.js.

import { ApiError } from "./api.js";
import { wireAuth } from "./auth.js";
import { applyDynamicRules, forgetCapabilities, loadProviders, wireComposer, writeValues } from "./composer.js";
import { defaultValues } from "./form.js";
import { jobDialog, wireJobDialog } from "./job_dialog.js";
import { library, wireLibrary } from "./library.js";
import { loadPresets, wirePresets } from "./presets.js";
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
  const results = await Promise.allSettled([loadProviders(diagnostics), loadPresets(), library.reset(), loadTeam()]);
  const failed = results.find((result) => result.status === "rejected");
  if (failed && !(failed.reason instanceof ApiError && failed.reason.status === 401)) {
    toast(`Some data could not be loaded: ${describeError(failed.reason)}`);
  }
  if ($("system-dialog").open) openSystem();
}

function start() {
  library.connectDialog(jobDialog);
  wireDialogs();
  wireAuth(reloadAll);
  wireComposer();
  wirePresets();
  wireLibrary();
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
