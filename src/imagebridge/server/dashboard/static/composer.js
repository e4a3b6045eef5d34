// The composer's controls: providers and their capabilities, the controls they allow and
// why not, the rules that follow the form's own values, the prompt counter and the error
// panel. Form rules live in form.js, checks.js and capabilities.js; the images an edit
// sends are sources.js; submission and the run it starts are run.js.

import { ApiError } from "./api.js";
import { api } from "./bridge.js";
import { utf8Length } from "./bytes.js";
import { constraintsFor, describeCapabilities } from "./capabilities.js";
import { serverLimits } from "./limits.js";
import * as store from "./store.js";
import { $, describeError, h } from "./ui.js";

const capabilityCache = new Map();
const ruleListeners = new Set();

/** Call `listener(isEdit)` whenever the form's rules were applied again (sources.js
 *  describes its inputs then). */
export function afterRules(listener) {
  ruleListeners.add(listener);
}

/** Forget every provider's cached capabilities (a reload may find others). */
export function forgetCapabilities() {
  capabilityCache.clear();
}

const form = () => $("compose-form");

function controls() {
  return [...form().elements].filter((element) => element.name && element.type !== "file" && element.tagName !== "BUTTON");
}

/** The values of the controls that will be sent: enabled ones, and locked single values. */
export function readValues() {
  const values = {};
  for (const element of controls()) {
    if (element.disabled && element.dataset.locked !== "1") continue;
    values[element.name] = element.type === "checkbox" ? element.checked : element.value;
  }
  return values;
}

export function writeValues(values) {
  for (const element of controls()) {
    if (!(element.name in values)) continue;
    const value = values[element.name];
    if (element.type === "checkbox") element.checked = value === true || value === "true";
    else element.value = value ?? "";
  }
}

export function fieldOf(name) {
  return form().elements.namedItem(name);
}

function hintOf(name) {
  return document.querySelector(`[data-hint-for="${name}"]`);
}

function labelOf(element) {
  return element && element.id ? document.querySelector(`label[for="${element.id}"]`) : null;
}

function cacheKey(provider, model) {
  return `${provider}\u0000${model || ""}`;
}

export async function capabilitiesFor(provider, model) {
  const key = cacheKey(provider, model);
  if (!capabilityCache.has(key)) {
    const promise = api.capabilities(provider, model || undefined);
    capabilityCache.set(key, promise);
    promise.catch(() => capabilityCache.delete(key));
  }
  return capabilityCache.get(key);
}

function fillProviders() {
  const select = fieldOf("provider");
  const sessionSelect = $("session-provider");
  const current = select.value || store.get("defaultProvider");
  select.replaceChildren();
  sessionSelect.replaceChildren();
  for (const descriptor of store.get("providers")) {
    const label = descriptor.display_name && descriptor.display_name !== descriptor.name ? `${descriptor.display_name} (${descriptor.name})` : descriptor.name;
    select.append(h("option", { value: descriptor.name, text: label }));
    sessionSelect.append(h("option", { value: descriptor.name, text: label }));
  }
  const names = store.get("providers").map((item) => item.name);
  select.value = names.includes(current) ? current : names.includes(store.get("defaultProvider")) ? store.get("defaultProvider") : names[0] || "";
  sessionSelect.value = select.value;
  fillModels();
}

export function fillModels() {
  const descriptor = store.get("providers").find((item) => item.name === fieldOf("provider").value);
  $("model-list").replaceChildren(...(descriptor ? descriptor.models : []).map((model) => h("option", { value: model })));
}

/** Providers, with the default chosen once diagnostics (which name it) have answered. */
export async function loadProviders(diagnosticsReady = Promise.resolve()) {
  const page = await api.providers();
  await diagnosticsReady;
  store.set("providers", page.items || []);
  fillProviders();
  await loadCapabilities();
}

export async function loadCapabilities() {
  const provider = fieldOf("provider").value;
  const model = fieldOf("model").value.trim();
  const note = $("provider-note");
  if (!provider) {
    store.set("capabilities", null);
    note.textContent = "No provider is registered.";
    applyConstraints();
    return;
  }
  try {
    store.set("capabilities", await capabilitiesFor(provider, model));
    setHint("model", "");
  } catch (error) {
    if (model && error instanceof ApiError && error.code === "unsupported_capability") {
      setHint("model", `${provider} does not serve this model.`, true);
      store.set("capabilities", await capabilitiesFor(provider, "").catch(() => null));
    } else {
      store.set("capabilities", null);
      note.textContent = `Capabilities could not be loaded: ${describeError(error)}`;
      applyConstraints();
      return;
    }
  }
  const descriptor = store.get("providers").find((item) => item.name === provider);
  const notes = [];
  if (descriptor && descriptor.experimental) notes.push("Experimental provider.");
  notes.push(describeCapabilities(store.get("capabilities")));
  note.textContent = notes.join(" ");
  applyConstraints();
}

export function setHint(name, text, invalid = false) {
  const hint = hintOf(name);
  if (hint) {
    hint.textContent = text;
    hint.classList.toggle("invalid", invalid);
  }
}

function restrictElement(element, reason) {
  element.disabled = true;
  element.title = reason;
  const label = labelOf(element);
  if (label) label.title = reason;
  setHint(element.name, reason);
}

/** Enable, disable and lock the controls from the capabilities and the current values. */
export function applyConstraints() {
  const operation = fieldOf("operation").value;
  const constraints = constraintsFor(store.get("capabilities"), operation);
  for (const element of [...controls(), fieldOf("images"), fieldOf("mask"), fieldOf("references")]) {
    element.disabled = false;
    element.removeAttribute("title");
    delete element.dataset.locked;
    delete element.dataset.unsupported;
    const label = labelOf(element);
    if (label) label.removeAttribute("title");
    if (element.tagName === "SELECT") {
      for (const option of element.options) {
        option.disabled = false;
        option.removeAttribute("title");
      }
    }
    if (!["model", "images", "mask", "references"].includes(element.name)) setHint(element.name, "");
  }
  for (const [name, rule] of Object.entries(constraints.controls)) {
    const element = fieldOf(name);
    if (!element) continue;
    restrictElement(element, rule.reason);
    element.dataset.unsupported = "1";
  }
  for (const [name, refused] of Object.entries(constraints.options)) {
    const select = fieldOf(name);
    if (!select || select.disabled) continue;
    for (const option of select.options) {
      if (option.value in refused) {
        option.disabled = true;
        option.title = refused[option.value];
      }
    }
    if (select.selectedOptions[0] && select.selectedOptions[0].disabled) {
      const first = [...select.options].find((option) => !option.disabled);
      if (first) select.value = first.value;
    }
    const labels = [...select.options].filter((option) => option.disabled).map((option) => option.textContent);
    if (labels.length) {
      const text = `Not available with this provider: ${labels.join(", ")}.`;
      select.title = text;
      setHint(name, text);
    }
  }
  for (const [name, lock] of Object.entries(constraints.locked)) {
    const element = fieldOf(name);
    if (!element || element.disabled) continue;
    element.value = lock.value;
    restrictElement(element, lock.reason);
    element.dataset.locked = "1";
  }
  const n = fieldOf("n");
  n.min = String(constraints.limits.n.min);
  n.max = String(constraints.limits.n.max);
  if (!n.disabled) setHint("n", `${constraints.limits.n.min}–${constraints.limits.n.max} per request.`);
  const partial = fieldOf("partial_images");
  partial.max = String(constraints.limits.partial_images.max);
  applyDynamicRules();
}

/** Rules that follow the form's own values rather than the provider. */
export function applyDynamicRules() {
  const operation = fieldOf("operation").value;
  const isEdit = operation === "edit";
  for (const name of ["images", "mask"]) {
    const element = fieldOf(name);
    if (element.dataset.unsupported === "1") continue;
    element.disabled = !isEdit;
    if (!isEdit) element.title = "Only used by edits.";
    else element.removeAttribute("title");
  }
  $("edit-source").hidden = !isEdit;
  $("submit-label").textContent = isEdit ? "Edit" : "Generate";
  for (const listener of ruleListeners) listener(isEdit);

  const dynamic = [
    ["size_custom", fieldOf("size").value !== "custom", "Choose Custom… as the size first."],
    ["output_compression", fieldOf("output_format").value === "png", "Compression applies to JPEG and WebP only."],
    ["session_key", fieldOf("session_mode").value !== "persistent", "Only used by persistent sessions."],
    ["thread_id", fieldOf("session_mode").value !== "thread", "Only used by explicit threads."],
  ];
  for (const [name, off, reason] of dynamic) {
    const element = fieldOf(name);
    if (element.dataset.unsupported === "1" || element.dataset.locked === "1") continue;
    element.disabled = off;
    if (off) {
      element.title = reason;
      setHint(name, reason);
    } else {
      element.removeAttribute("title");
      setHint(name, "");
    }
  }
  updatePromptCounter();
}

function updatePromptCounter() {
  const bytes = utf8Length(fieldOf("prompt").value);
  const counter = $("prompt-count");
  const limit = serverLimits().prompt_bytes;
  counter.textContent = `${bytes} / ${limit} bytes`;
  counter.classList.toggle("invalid", bytes > limit);
}

export function clearFormErrors() {
  const panel = $("form-errors");
  panel.hidden = true;
  panel.replaceChildren();
  for (const element of form().querySelectorAll("[aria-invalid]")) element.removeAttribute("aria-invalid");
}

export function showFormErrors(title, issues, suggestions = []) {
  const panel = $("form-errors");
  const list = h(
    "ul",
    {},
    issues.map((issue) => {
      const element = issue.field ? fieldOf(issue.field) : null;
      if (element) element.setAttribute("aria-invalid", "true");
      const text = issue.field && !element ? `${issue.field}: ${issue.message}` : issue.message;
      if (!element) return h("li", { text });
      return h("li", {}, h("button", { type: "button", class: "link", onclick: () => revealField(element), text }));
    }),
  );
  panel.replaceChildren(h("strong", { text: title }), issues.length ? list : null, suggestions.length ? h("ul", { class: "suggestions" }, suggestions.map((text) => h("li", { text }))) : null);
  panel.hidden = false;
  panel.scrollIntoView({ block: "nearest" });
}

/**
 * Fill the form with `values` (a preset's or a job's settings): the provider first, so its
 * capabilities shape the rest. Returns whether that provider is registered here.
 */
export async function applyValues(values) {
  const provider = values.provider || fieldOf("provider").value;
  const known = store.get("providers").some((item) => item.name === provider);
  writeValues(values);
  if (!known) fieldOf("provider").value = store.get("providers").some((item) => item.name === fieldOf("provider").value) ? fieldOf("provider").value : store.get("defaultProvider");
  else fieldOf("provider").value = provider;
  fillModels();
  fieldOf("model").value = values.model || "";
  await loadCapabilities();
  const rest = { ...values };
  delete rest.provider;
  writeValues(rest);
  applyConstraints();
  clearFormErrors();
  return known;
}

/** Show a control, opening the "More settings" panel when it is inside, and focus it. */
export function revealField(element) {
  const group = element.closest("details");
  if (group) group.open = true;
  element.focus();
}

export function wireComposer() {
  fieldOf("prompt").addEventListener("input", updatePromptCounter);
  fieldOf("provider").addEventListener("change", () => {
    fillModels();
    fieldOf("model").value = "";
    loadCapabilities();
  });
  fieldOf("model").addEventListener("change", () => loadCapabilities());
  for (const name of ["operation", "size", "output_format", "session_mode"]) {
    fieldOf(name).addEventListener("change", applyDynamicRules);
  }
}
