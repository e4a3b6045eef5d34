// What a job asked for and what it delivered, as the lightbox and the job dialog show it:
// the asked-versus-delivered table, every requested and effective parameter, normalizations,
// warnings and the error panel.

import { h, table } from "./ui.js";

export function showValue(value) {
  if (value === undefined || value === null) return "–";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function changedCell(before, after) {
  return before === after ? after : h("span", {}, after, h("span", { class: "visually-hidden", text: " (changed)" }));
}

/**
 * The choices people make, asked against delivered for one image of `job` (`image` is its
 * result's data entry, or null for the job as a whole).
 */
export function askedDelivered(job, image = null) {
  const request = job.request || {};
  const asked = request.parameters || {};
  const routing = request.routing || {};
  const result = job.result || null;
  const effective = (result && result.effective) || {};
  const rows = [
    ["Provider", routing.provider || "default", result ? result.provider : "–"],
    ["Model", routing.model || "default", result ? result.model : "–"],
    ["Size", asked.size || "auto", image ? `${image.width}x${image.height}` : showValue(effective.size)],
    ["Format", asked.output_format || "png", image ? image.format : showValue(effective.output_format)],
    ["Quality", asked.quality || "auto", showValue(effective.quality)],
    ["Background", asked.background || "auto", showValue(effective.background)],
    ["Images", String(asked.n || 1), result ? String(result.data.length) : "–"],
  ];
  const changed = rows.map(([, before, after]) => result !== null && before !== after && !(before === "default" || before === "auto"));
  return table(
    ["", "Asked", "Delivered"],
    rows.map(([name, before, after], index) => [name, before, changed[index] ? changedCell(before, after) : after]),
    { caption: "Asked and delivered", rowClass: (index) => (changed[index] ? "changed" : null) },
  );
}

/** Every parameter, requested against effective, the changed rows marked. */
export function parameterTable(requested, effective) {
  const keys = [...new Set([...Object.keys(requested || {}), ...Object.keys(effective || {})])];
  const rows = keys.map((key) => {
    const before = showValue((requested || {})[key]);
    const after = showValue((effective || {})[key]);
    const changed = before !== after;
    return { cells: [key, before, changed ? changedCell(before, after) : after], changed };
  });
  return h(
    "section",
    {},
    h("h3", { text: "Requested and effective parameters" }),
    table(["Parameter", "Requested", "Effective"], rows.map((row) => row.cells), { rowClass: (index) => (rows[index].changed ? "changed" : null) }),
  );
}

export function normalizationTable(result) {
  return table(
    ["Field", "Requested", "Effective", "Reason"],
    result.normalizations.map((item) => [item.field, showValue(item.requested), showValue(item.effective), item.reason]),
  );
}

export function warningList(result) {
  return h("ul", { class: "warnings" }, result.warnings.map((warning) => h("li", { text: warning.replace(/_/g, " ") })));
}

export function errorPanel(error) {
  return h(
    "section",
    { class: "error-panel" },
    h("h3", { text: "Error" }),
    h("p", {}, h("strong", { text: error.code }), ` ${error.message}`),
    h("p", { class: "muted", text: error.retryable ? "Retrying may help." : "Retrying the same request will not help." }),
    error.suggestions && error.suggestions.length ? h("ul", { class: "suggestions" }, error.suggestions.map((text) => h("li", { text }))) : null,
  );
}

/** The settings of a request people copy: parameters, routing and policies, without inputs. */
export function copyableSettings(job) {
  const request = job.request || {};
  const settings = {};
  for (const key of ["operation", "prompt", "negative_prompt", "parameters", "routing", "output", "policies"]) {
    if (request[key] !== undefined) settings[key] = request[key];
  }
  if (settings.output) {
    settings.output = { ...settings.output };
    delete settings.output.response_format;
  }
  return settings;
}
