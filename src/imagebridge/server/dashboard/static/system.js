// The system view: diagnostics, configuration provenance, the capability matrix and
// session bindings.

import { ApiError } from "./api.js";
import { api } from "./bridge.js";
import { capabilitiesFor } from "./composer.js";
import { formatBytes } from "./bytes.js";
import * as store from "./store.js";
import { $, confirmAction, definitionList, describeError, formatMs, formatTime, h, table } from "./ui.js";

export async function loadDiagnostics() {
  const diagnostics = await api.diagnostics();
  store.set("diagnostics", diagnostics);
  store.set("defaultProvider", diagnostics.configuration.default_provider || store.get("defaultProvider"));
  if (diagnostics.configuration.authentication_required) $("auth-button").hidden = false;
  return diagnostics;
}

function renderSummary(diagnostics) {
  const config = diagnostics.configuration;
  const jobs = diagnostics.jobs || null;
  const ready = diagnostics.providers.filter((item) => item.status === "ready").length;
  const entries = [
    ["Bridge version", diagnostics.bridge_version],
    ["Providers ready", `${ready}/${diagnostics.providers.length}`],
    ["Listener", `${config.listener_scope}${config.listener_port ? ` · port ${config.listener_port}` : ""}`],
    ["Bridge authentication", config.authentication_required ? "bearer token" : "none"],
    ["Runtime queued", String(diagnostics.runtime.global_queued)],
    ["Active workers", jobs ? `${jobs.active_workers} of ${jobs.max_running}` : "–"],
    ["Retained jobs", jobs ? String(jobs.total) : "jobs disabled"],
    ["Job database", jobs ? formatBytes(jobs.database_bytes) : "–"],
    ["Artifact storage", diagnostics.artifact_storage_enabled ? "enabled" : "disabled"],
    ["Metrics", config.metrics_enabled ? "enabled" : "disabled"],
    ["Redacted events", `${diagnostics.events.items.length}${diagnostics.events.dropped ? ` (${diagnostics.events.dropped} dropped)` : ""}`],
  ];
  const parts = [definitionList(entries)];
  if (jobs) {
    parts.push(
      h("h4", { text: "Jobs" }),
      table(["Queued", "Running", "Succeeded", "Failed", "Cancelled", "Interrupted", "Hidden"], [[jobs.queued, jobs.running, jobs.succeeded, jobs.failed, jobs.cancelled, jobs.interrupted, jobs.hidden].map(String)]),
    );
  }
  const queued = Object.entries(diagnostics.runtime.providers_queued || {});
  const breakers = diagnostics.runtime.circuit_breakers || {};
  parts.push(
    h("h4", { text: "Queues and circuit breakers" }),
    table(
      ["Provider", "Queued", "Breaker", "Consecutive failures", "Retry after", "Rejected", "Transitions"],
      queued.map(([name, count]) => {
        const breaker = breakers[name] || {};
        return [name, String(count), breaker.state || "–", String(breaker.consecutive_failures ?? "–"), breaker.retry_after_ms ? formatMs(breaker.retry_after_ms) : "–", String(breaker.rejected_calls ?? "–"), String(breaker.transitions ?? "–")];
      }),
    ),
  );
  const unready = diagnostics.providers.filter((item) => item.status !== "ready");
  if (unready.length) {
    parts.push(h("h4", { text: "Providers not ready" }), table(["Provider", "Code", "Message"], unready.map((item) => [item.provider, item.error ? item.error.code : "–", item.error ? item.error.message : "–"])));
  }
  const windows = [];
  for (const [name, detail] of Object.entries(diagnostics.providers_detail || {})) {
    const quota = detail && detail.quota;
    if (!quota) continue;
    const snapshot = quota.windows ? quota : quota.quota || {};
    for (const window of snapshot.windows || []) {
      windows.push([name, window.name, `${window.used_percent}%`, window.window_minutes ? `${window.window_minutes} min` : "–", window.resets_at ? formatTime(window.resets_at) : "–"]);
    }
    if (!(snapshot.windows || []).length) windows.push([name, quota.status || "unavailable", "–", "–", quota.error ? quota.error.message : "–"]);
  }
  if (windows.length) parts.push(h("h4", { text: "Quota windows" }), table(["Provider", "Window", "Used", "Length", "Resets"], windows));
  const accounts = accountRows(diagnostics.providers_detail || {});
  if (accounts.length) {
    parts.push(
      h("h4", { text: "Accounts" }),
      table(["Provider", "Account", "Login", "State", "Image quota left", "Image resets", "Breaker", "In flight", "Calls (24 h)", "Failures (24 h)"], accounts),
    );
  }
  $("sys-summary").replaceChildren(...parts);
  $("sys-events").replaceChildren(
    diagnostics.events.items.length
      ? table(["Time", "Method", "Route", "Status", "Duration"], diagnostics.events.items.map((item) => [new Date(item.timestamp_ms).toLocaleTimeString(), item.method, item.route, String(item.status), formatMs(item.duration_ms)]))
      : h("p", { class: "muted", text: "No requests recorded yet." }),
  );
  renderProvenance(diagnostics);
}

// One row per pool account and transport (providers_detail.<provider>.accounts): ready or
// why not, the image windows, the breaker, the calls of the last 24 hours. The login shows
// only as the short hash the bridge sends.
function accountRows(details) {
  const rows = [];
  for (const [name, detail] of Object.entries(details)) {
    const pool = detail && detail.accounts;
    if (!pool || !Array.isArray(pool.accounts)) continue;
    for (const account of pool.accounts) {
      const quota = account.quota || {};
      const windows = quota.image_windows || [];
      const resets = windows.map((window) => (window.resets_at ? `${window.label || window.name} ${formatTime(window.resets_at)}` : "")).filter(Boolean).join(", ");
      const state = account.ready ? "ready" : `${account.reason || "not ready"}${account.ready_at ? ` until ${formatTime(account.ready_at)}` : ""}`;
      const left = quota.image_remaining_percent ?? null;
      const breaker = account.breaker || {};
      rows.push([name, account.name, `${account.login}${account.login_id ? ` · ${account.login_id}` : ""}`, state, left === null ? "–" : `${left}%`, resets || "–", breaker.state || "–", String(account.in_flight ?? 0), String(account.calls_24h ?? 0), String(account.failures_24h ?? 0)]);
    }
  }
  return rows;
}

function renderProvenance(diagnostics) {
  const all = diagnostics.configuration.provenance || [];
  const includeDefaults = $("sys-config-defaults").checked;
  const rows = all.filter((item) => includeDefaults || item.source !== "default");
  $("sys-config").replaceChildren(
    rows.length
      ? table(["Field", "Source", "Key"], rows.map((item) => [item.field, item.source, item.key]))
      : h("p", { class: "muted", text: includeDefaults ? "No configuration fields." : "Every field has its default value." }),
  );
}

async function renderMatrix(diagnostics) {
  const health = new Map(diagnostics.providers.map((item) => [item.provider, item.status]));
  const pairs = [];
  for (const descriptor of store.get("providers")) {
    for (const model of descriptor.models.length ? descriptor.models : [""]) pairs.push([descriptor, model]);
  }
  const rows = await Promise.all(
    pairs.map(async ([descriptor, model]) => {
      try {
        const caps = await capabilitiesFor(descriptor.name, model);
        const batching = caps.batching.mode === "native" ? "native" : `fan-out ×${caps.batching.max_parallel_outputs}`;
        const sessions = [caps.persistent_sessions ? "persistent" : "", caps.explicit_threads ? "threads" : ""].filter(Boolean).join(", ") || "none";
        const notes = [descriptor.experimental ? "experimental" : "", caps.partial_images.max ? `previews ≤${caps.partial_images.max}` : "", caps.masks.support !== "unsupported" ? "masks" : ""].filter(Boolean).join(", ");
        return [descriptor.name, health.get(descriptor.name) || "unknown", caps.model || model || "default", caps.generation ? "yes" : "no", caps.edits ? "yes" : "no", `${caps.count.min}–${caps.count.max}`, batching, caps.output_formats.join(", "), caps.transparent_background, sessions, notes || "–"];
      } catch (error) {
        return [descriptor.name, health.get(descriptor.name) || "unknown", model || "default", "–", "–", "–", "–", "–", "–", "–", describeError(error)];
      }
    }),
  );
  $("sys-matrix").replaceChildren(table(["Provider", "Health", "Model", "Generate", "Edit", "Count", "Batching", "Formats", "Transparency", "Sessions", "Notes"], rows));
}

export async function openSystem() {
  const dialog = $("system-dialog");
  if (!dialog.open) dialog.showModal();
  $("sys-summary").replaceChildren(h("p", { class: "muted", text: "Loading…" }));
  try {
    const diagnostics = await loadDiagnostics();
    renderSummary(diagnostics);
    await renderMatrix(diagnostics);
  } catch (error) {
    $("sys-summary").replaceChildren(h("p", { class: "error-text", text: `Diagnostics could not be loaded: ${describeError(error)}` }));
  }
}

async function lookupSession(event) {
  event.preventDefault();
  const key = $("session-key").value.trim();
  const provider = $("session-provider").value;
  const out = $("session-result");
  if (!key) {
    out.replaceChildren(h("p", { class: "error-text", text: "Enter a session key." }));
    $("session-key").focus();
    return;
  }
  try {
    const session = await api.session(key, provider);
    const remove = h("button", { type: "button", class: "danger", text: "Delete binding", onclick: () => deleteSession(key, provider) });
    out.replaceChildren(definitionList([["Key", session.key || key], ["Thread", session.thread_id || "–"], ["Reused", session.reused ? "yes" : "no"], ["Provider", provider]]), remove);
  } catch (error) {
    out.replaceChildren(h("p", { class: "error-text", text: error instanceof ApiError && error.code === "session" ? `No persistent session is bound to ${key}.` : describeError(error) }));
  }
}

async function deleteSession(key, provider) {
  const confirmed = await confirmAction("Delete session binding", `Forget the binding for ${key}? The upstream thread itself is kept.`, "Delete binding");
  if (!confirmed) return;
  try {
    await api.deleteSession(key, provider);
    $("session-result").replaceChildren(h("p", { text: `The binding for ${key} was deleted.` }));
  } catch (error) {
    $("session-result").replaceChildren(h("p", { class: "error-text", text: describeError(error) }));
  }
}

export function wireSystem() {
  $("system-button").addEventListener("click", openSystem);
  $("session-form").addEventListener("submit", lookupSession);
  $("sys-config-defaults").addEventListener("change", () => store.get("diagnostics") && renderProvenance(store.get("diagnostics")));
}
