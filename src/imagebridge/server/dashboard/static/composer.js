// The composer: providers and their capabilities, the controls they allow, file inputs
// and submission as a durable job. Form rules live in form.js; limits come from the
// bridge (limits.js).

import { ApiError } from "./api.js";
import { api } from "./bridge.js";
import { IMAGE_TYPES, buildRequest, checkValues, constraintsFor, defaultValues, describeCapabilities, formatBytes, safeFilename, sniffImageType, utf8Length } from "./form.js";
import { library } from "./library.js";
import { serverLimits } from "./limits.js";
import * as store from "./store.js";
import { $, describeError, h, plural, toast } from "./ui.js";

const DEFAULT_MAX_FILE_BYTES = 32 * 1024 * 1024;
const capabilityCache = new Map();
let inputs = { images: [], mask: null, references: [] };

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

function setHint(name, text, invalid = false) {
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
    if (!isEdit) {
      element.title = "Only used by edits.";
      setHint(name, "Only used by edits.");
    } else {
      element.removeAttribute("title");
      describeInputs(name);
    }
  }
  if (fieldOf("references").dataset.unsupported !== "1") describeInputs("references");
  $("submit-button").textContent = isEdit ? "Edit" : "Generate";

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

// -- composer: file inputs ----------------------------------------------------------------

function describeInputs(name) {
  const items = name === "mask" ? (inputs.mask ? [inputs.mask] : []) : inputs[name];
  if (!items.length) {
    setHint(name, "PNG, JPEG or WebP.");
    return;
  }
  const total = items.reduce((sum, item) => sum + item.size, 0);
  setHint(name, `${plural(items.length, "image")} selected (${formatBytes(total)}).`);
}

function readDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.addEventListener("load", () => resolve(String(reader.result)));
    reader.addEventListener("error", () => reject(reader.error || new Error("the file could not be read")));
    reader.readAsDataURL(file);
  });
}

async function readImage(file) {
  const head = new Uint8Array(await file.slice(0, 16).arrayBuffer());
  const type = sniffImageType(head);
  if (!IMAGE_TYPES.includes(type)) throw new Error(`${file.name} is not a PNG, JPEG or WebP image.`);
  const dataUrl = await readDataUrl(file);
  const payload = dataUrl.slice(dataUrl.indexOf(",") + 1);
  return { name: safeFilename(file.name), size: file.size, type, dataUrl: `data:${type};base64,${payload}` };
}

/** The largest file of this kind the provider takes; nothing bigger is even read. */
function maxFileBytes(name) {
  const caps = store.get("capabilities");
  const limits = caps ? { images: caps.edit_images, mask: caps.masks, references: caps.reference_images }[name] : null;
  return limits && limits.max_bytes_each > 0 ? limits.max_bytes_each : DEFAULT_MAX_FILE_BYTES;
}

async function onFilesChosen(event) {
  const input = event.target;
  const name = input.name;
  const files = [...input.files];
  try {
    const limit = maxFileBytes(name);
    const large = files.find((file) => file.size > limit);
    if (large) throw new Error(`${large.name} is larger than ${formatBytes(limit)}.`);
    const items = await Promise.all(files.map(readImage));
    if (name === "mask") inputs.mask = items[0] || null;
    else inputs[name] = items;
    describeInputs(name);
  } catch (error) {
    input.value = "";
    if (name === "mask") inputs.mask = null;
    else inputs[name] = [];
    setHint(name, describeError(error), true);
  }
}

// -- composer: submission -----------------------------------------------------------------

export function clearFormErrors() {
  const panel = $("form-errors");
  panel.hidden = true;
  panel.replaceChildren();
  for (const element of form().querySelectorAll("[aria-invalid]")) element.removeAttribute("aria-invalid");
}

function showFormErrors(title, issues, suggestions = []) {
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

function revealField(element) {
  const group = element.closest("details");
  if (group) group.open = true;
  element.focus();
}

function selectedInputs() {
  return { images: inputs.images, mask: inputs.mask, references: inputs.references };
}

async function submitComposer(event) {
  event.preventDefault();
  clearFormErrors();
  const values = readValues();
  const chosen = selectedInputs();
  const issues = checkValues(values, chosen, store.get("capabilities"), serverLimits());
  if (issues.length) {
    showFormErrors("Please fix these before submitting:", issues);
    const first = issues.find((issue) => fieldOf(issue.field));
    if (first) revealField(fieldOf(first.field));
    return;
  }
  const request = buildRequest(values, chosen);
  const maxBody = serverLimits().body_bytes;
  const size = maxBody ? utf8Length(JSON.stringify(request)) : 0;
  if (maxBody && size > maxBody) {
    showFormErrors(`The request is ${formatBytes(size)}; this bridge accepts at most ${formatBytes(maxBody)}.`, [{ field: "images", message: "Send fewer or smaller images." }]);
    return;
  }
  const button = $("submit-button");
  button.disabled = true;
  try {
    await api.createJob(request);
    toast("Job queued.");
    fieldOf("idempotency_key").value = "";
    await library.refresh();
  } catch (error) {
    if (error instanceof ApiError) {
      const issues = error.issues.map((issue) => ({ field: fieldForIssue(issue.field), message: `${issue.field}: ${issue.message}` }));
      showFormErrors(`The bridge refused the request: ${error.message}${error.code ? ` (${error.code})` : ""}`, issues, error.suggestions);
    } else {
      showFormErrors(`The request could not be sent: ${describeError(error)}`, []);
    }
  } finally {
    button.disabled = false;
  }
}

/** The composer control behind a wire field path such as "parameters.n" or "images[0]". */
function fieldForIssue(path) {
  const wire = String(path || "").replace(/\[\d+\]$/, "");
  const map = {
    prompt: "prompt",
    negative_prompt: "negative_prompt",
    images: "images",
    mask: "mask",
    reference_images: "references",
    "parameters.n": "n",
    "parameters.size": "size",
    "parameters.aspect_ratio": "aspect_ratio",
    "parameters.resolution": "resolution",
    "parameters.output_compression": "output_compression",
    "parameters.partial_images": "partial_images",
    "parameters.input_fidelity": "input_fidelity",
    "parameters.action": "action",
    "routing.model": "model",
    "routing.fallbacks": "fallbacks",
    "session.key": "session_key",
    "session.thread_id": "thread_id",
    "output.directory": "directory",
    "output.filename": "filename",
    "output.filename_prefix": "filename_prefix",
    "output.collision": "collision",
    "output.metadata": "metadata",
    "output.transparency.key_color": "key_color",
    "output.transparency.transparent_threshold": "transparent_threshold",
    timeout_ms: "timeout_ms",
    idempotency_key: "idempotency_key",
    user: "user",
  };
  return map[wire] || null;
}

function resetComposer() {
  const provider = fieldOf("provider").value;
  writeValues(defaultValues());
  fieldOf("provider").value = provider;
  for (const name of ["images", "mask", "references"]) fieldOf(name).value = "";
  inputs = { images: [], mask: null, references: [] };
  clearFormErrors();
  loadCapabilities();
}

export function wireComposer() {
  form().addEventListener("submit", submitComposer);
  $("reset-button").addEventListener("click", resetComposer);
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
  for (const name of ["images", "mask", "references"]) fieldOf(name).addEventListener("change", onFilesChosen);
}
