// The dashboard page: composer, library, job details, operator view and authentication.
//
// Everything on screen comes from the bridge's /v1 routes through api.js; form rules
// live in form.js. Text from the bridge (prompts, messages) is only ever set as text,
// never parsed as HTML. Images are authenticated blobs shown through blob: URLs that are
// revoked when no longer shown.

import { ApiError, BridgeApi } from "./api.js";
import {
  IMAGE_TYPES,
  SEARCH_MAX_BYTES,
  buildRequest,
  checkPreset,
  checkValues,
  constraintsFor,
  defaultValues,
  describeCapabilities,
  formatBytes,
  safeFilename,
  sniffImageType,
  templateFromValues,
  utf8Length,
  valuesFromTemplate,
} from "./form.js";
import { serverLimits } from "./limits.js";

const PAGE_SIZE = 24;
const POLL_ACTIVE_MS = 2500;
const POLL_IDLE_MS = 15000;
const POLL_HIDDEN_MS = 5000;
const POLL_VISIBLE_MS = 250;
const SEARCH_DEBOUNCE_MS = 300;
const TOAST_MS = 4000;
const CARD_THUMBNAIL_EDGE = 640;
const DETAIL_PREVIEW_EDGE = 1024;
const DETAIL_CONCURRENCY = 4;
const DEFAULT_MAX_FILE_BYTES = 32 * 1024 * 1024;
const ACTIVE = new Set(["queued", "running"]);

const api = new BridgeApi();

// -- small helpers ------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function formatTime(seconds) {
  if (typeof seconds !== "number") return "–";
  return new Date(seconds * 1000).toLocaleString();
}

function formatMs(ms) {
  if (typeof ms !== "number") return "–";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

function describeError(error) {
  if (error instanceof ApiError) return error.message;
  return error && error.message ? error.message : String(error);
}

function table(headers, rows, { caption, rowClass } = {}) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      caption ? h("caption", { text: caption }) : null,
      h("thead", {}, h("tr", {}, headers.map((header) => h("th", { scope: "col", text: header })))),
      h(
        "tbody",
        {},
        rows.map((row, index) => h("tr", { class: rowClass ? rowClass(index) : null }, row.map((cell) => h("td", {}, cell instanceof Node ? cell : String(cell ?? "–"))))),
      ),
    ),
  );
}

function definitionList(entries) {
  return h(
    "dl",
    { class: "facts" },
    entries.filter(Boolean).map(([term, value]) => [h("dt", { text: term }), h("dd", {}, value instanceof Node ? value : String(value ?? "–"))]),
  );
}

let toastTimer = null;
function toast(message) {
  const node = $("toast");
  node.textContent = message;
  node.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    node.hidden = true;
  }, TOAST_MS);
}

function confirmAction(title, message, confirmLabel = "Confirm") {
  const dialog = $("confirm-dialog");
  $("confirm-title").textContent = title;
  $("confirm-message").textContent = message;
  $("confirm-ok").textContent = confirmLabel;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
    dialog.showModal();
    $("confirm-cancel").focus();
  });
}

/**
 * Object URLs for authenticated image blobs, one per key (a thumbnail or a full image).
 * Whoever shows an image drops its key when the image leaves the screen, so memory
 * follows what is displayed.
 */
class BlobUrls {
  constructor() {
    this.entries = new Map();
  }

  get(key, load) {
    if (!this.entries.has(key)) {
      const promise = load().then((blob) => (blob ? URL.createObjectURL(blob) : null));
      this.entries.set(key, promise);
      promise.catch(() => this.entries.delete(key));
    }
    return this.entries.get(key);
  }

  drop(key) {
    const found = this.entries.get(key);
    if (!found) return;
    this.entries.delete(key);
    found.then((url) => url && URL.revokeObjectURL(url), () => {});
  }
}

const blobs = new BlobUrls();

// -- connection and authentication --------------------------------------------------------

const state = {
  providers: [],
  defaultProvider: "",
  capabilities: null,
  capabilityCache: new Map(),
  diagnostics: null,
  presets: [],
  inputs: { images: [], mask: null, references: [] },
  authShown: false,
  paused: false,
};

function setConnection(kind, text) {
  const node = $("connection");
  node.dataset.state = kind;
  node.textContent = text;
}

function connectionText() {
  const diagnostics = state.diagnostics;
  if (!diagnostics) return "Connected";
  const ready = diagnostics.providers.filter((item) => item.status === "ready").length;
  return `Connected · v${diagnostics.bridge_version} · ${ready}/${diagnostics.providers.length} providers ready`;
}

api.addEventListener("connection", (event) => {
  if (event.detail === "online") setConnection("online", connectionText());
  else if (event.detail === "offline") setConnection("offline", "Offline: the bridge cannot be reached");
  else if (event.detail === "unauthorized") setConnection("unauthorized", "Authentication required");
});

api.addEventListener("unauthorized", () => {
  $("auth-button").hidden = false;
  state.paused = true;
  if (!state.authShown) {
    state.authShown = true;
    openAuthDialog(api.token ? "The bridge refused the saved token. Enter the current one." : "This bridge needs its bearer token.");
  }
});

function openAuthDialog(message = "") {
  const dialog = $("auth-dialog");
  $("auth-message").textContent = message;
  $("auth-token").value = "";
  if (!dialog.open) dialog.showModal();
  $("auth-token").focus();
}

function wireAuth() {
  $("auth-button").addEventListener("click", () => openAuthDialog(api.token ? "A token is saved for this tab." : ""));
  $("auth-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("auth-token").value;
    if (!token.trim()) {
      $("auth-message").textContent = "Enter the bearer token first.";
      return;
    }
    try {
      api.setToken(token);
    } catch (error) {
      $("auth-message").textContent = describeError(error);
      return;
    }
    $("auth-token").value = "";
    $("auth-dialog").close();
    state.authShown = false;
    state.paused = false;
    toast("Token saved for this tab.");
    reloadAll();
  });
  $("auth-forget").addEventListener("click", () => {
    api.clearToken();
    $("auth-token").value = "";
    $("auth-message").textContent = "The token was removed from this tab.";
  });
  $("auth-dialog").addEventListener("close", () => {
    state.authShown = false;
  });
}

// -- composer: providers and capabilities -------------------------------------------------

const form = () => $("compose-form");

function controls() {
  return [...form().elements].filter((element) => element.name && element.type !== "file" && element.tagName !== "BUTTON");
}

/** The values of the controls that will be sent: enabled ones, and locked single values. */
function readValues() {
  const values = {};
  for (const element of controls()) {
    if (element.disabled && element.dataset.locked !== "1") continue;
    values[element.name] = element.type === "checkbox" ? element.checked : element.value;
  }
  return values;
}

function writeValues(values) {
  for (const element of controls()) {
    if (!(element.name in values)) continue;
    const value = values[element.name];
    if (element.type === "checkbox") element.checked = value === true || value === "true";
    else element.value = value ?? "";
  }
}

function fieldOf(name) {
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

async function capabilitiesFor(provider, model) {
  const key = cacheKey(provider, model);
  if (!state.capabilityCache.has(key)) {
    const promise = api.capabilities(provider, model || undefined);
    state.capabilityCache.set(key, promise);
    promise.catch(() => state.capabilityCache.delete(key));
  }
  return state.capabilityCache.get(key);
}

function fillProviders() {
  const select = fieldOf("provider");
  const sessionSelect = $("session-provider");
  const current = select.value || state.defaultProvider;
  select.replaceChildren();
  sessionSelect.replaceChildren();
  for (const descriptor of state.providers) {
    const label = descriptor.display_name && descriptor.display_name !== descriptor.name ? `${descriptor.display_name} (${descriptor.name})` : descriptor.name;
    select.append(h("option", { value: descriptor.name, text: label }));
    sessionSelect.append(h("option", { value: descriptor.name, text: label }));
  }
  const names = state.providers.map((item) => item.name);
  select.value = names.includes(current) ? current : names.includes(state.defaultProvider) ? state.defaultProvider : names[0] || "";
  sessionSelect.value = select.value;
  fillModels();
}

function fillModels() {
  const descriptor = state.providers.find((item) => item.name === fieldOf("provider").value);
  $("model-list").replaceChildren(...(descriptor ? descriptor.models : []).map((model) => h("option", { value: model })));
}

/** Providers, with the default chosen once diagnostics (which name it) have answered. */
async function loadProviders(diagnosticsReady = Promise.resolve()) {
  const page = await api.providers();
  await diagnosticsReady;
  state.providers = page.items || [];
  fillProviders();
  await loadCapabilities();
}

async function loadCapabilities() {
  const provider = fieldOf("provider").value;
  const model = fieldOf("model").value.trim();
  const note = $("provider-note");
  if (!provider) {
    state.capabilities = null;
    note.textContent = "No provider is registered.";
    applyConstraints();
    return;
  }
  try {
    state.capabilities = await capabilitiesFor(provider, model);
    setHint("model", "");
  } catch (error) {
    if (model && error instanceof ApiError && error.code === "unsupported_capability") {
      setHint("model", `${provider} does not serve this model.`, true);
      state.capabilities = await capabilitiesFor(provider, "").catch(() => null);
    } else {
      state.capabilities = null;
      note.textContent = `Capabilities could not be loaded: ${describeError(error)}`;
      applyConstraints();
      return;
    }
  }
  const descriptor = state.providers.find((item) => item.name === provider);
  const notes = [];
  if (descriptor && descriptor.experimental) notes.push("Experimental provider.");
  notes.push(describeCapabilities(state.capabilities));
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
function applyConstraints() {
  const operation = fieldOf("operation").value;
  const constraints = constraintsFor(state.capabilities, operation);
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
function applyDynamicRules() {
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
  const items = name === "mask" ? (state.inputs.mask ? [state.inputs.mask] : []) : state.inputs[name];
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
  const caps = state.capabilities;
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
    if (name === "mask") state.inputs.mask = items[0] || null;
    else state.inputs[name] = items;
    describeInputs(name);
  } catch (error) {
    input.value = "";
    if (name === "mask") state.inputs.mask = null;
    else state.inputs[name] = [];
    setHint(name, describeError(error), true);
  }
}

// -- composer: submission -----------------------------------------------------------------

function clearFormErrors() {
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
  return { images: state.inputs.images, mask: state.inputs.mask, references: state.inputs.references };
}

async function submitComposer(event) {
  event.preventDefault();
  clearFormErrors();
  const values = readValues();
  const inputs = selectedInputs();
  const issues = checkValues(values, inputs, state.capabilities, serverLimits());
  if (issues.length) {
    showFormErrors("Please fix these before submitting:", issues);
    const first = issues.find((issue) => fieldOf(issue.field));
    if (first) revealField(fieldOf(first.field));
    return;
  }
  const request = buildRequest(values, inputs);
  const maxBody = serverLimits().body_bytes;
  const size = maxBody ? utf8Length(JSON.stringify(request)) : 0;
  if (maxBody && size > maxBody) {
    showFormErrors(`The request is ${formatBytes(size)}; this bridge accepts at most ${formatBytes(maxBody)}.`, [{ field: "images", message: "Send fewer or smaller images." }]);
    return;
  }
  const button = $("submit-button");
  button.disabled = true;
  try {
    const job = await api.createJob(request);
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
  state.inputs = { images: [], mask: null, references: [] };
  clearFormErrors();
  loadCapabilities();
}

function wireComposer() {
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

// -- presets ------------------------------------------------------------------------------

let presetMode = "create";

async function loadPresets(select = null) {
  state.presets = await api.listPresets();
  const element = $("preset-select");
  const current = select ?? element.value;
  element.replaceChildren(h("option", { value: "", text: "No preset" }));
  for (const preset of state.presets) {
    element.append(h("option", { value: preset.name, text: preset.description ? `${preset.name} — ${preset.description}` : preset.name }));
  }
  element.value = state.presets.some((preset) => preset.name === current) ? current : "";
  updatePresetButtons();
}

function selectedPreset() {
  const name = $("preset-select").value;
  return state.presets.find((preset) => preset.name === name) || null;
}

function updatePresetButtons() {
  const none = !selectedPreset();
  for (const id of ["preset-apply", "preset-edit", "preset-delete"]) $(id).disabled = none;
}

async function applyPreset() {
  const preset = selectedPreset();
  if (!preset) return;
  const values = valuesFromTemplate(preset.template);
  const provider = values.provider || fieldOf("provider").value;
  writeValues(values);
  const known = state.providers.some((item) => item.name === provider);
  fieldOf("provider").value = known ? provider : fieldOf("provider").value;
  fillModels();
  fieldOf("model").value = values.model;
  await loadCapabilities();
  writeValues(valuesWithout(values, ["provider"]));
  applyConstraints();
  clearFormErrors();
  toast(known ? `Applied preset ${preset.name}.` : `Applied preset ${preset.name}; its provider ${provider} is not available here.`);
}

function valuesWithout(values, names) {
  const copy = { ...values };
  for (const name of names) delete copy[name];
  return copy;
}

function openPresetDialog(mode) {
  presetMode = mode;
  const preset = selectedPreset();
  const name = $("preset-name");
  $("preset-message").hidden = true;
  if (mode === "edit" && preset) {
    $("preset-dialog-title").textContent = `Edit preset ${preset.name}`;
    name.value = preset.name;
    name.readOnly = true;
    $("preset-description").value = preset.description || "";
    $("preset-replace-field").hidden = false;
    $("preset-replace").checked = true;
  } else {
    $("preset-dialog-title").textContent = "Save the form as a preset";
    name.value = "";
    name.readOnly = false;
    $("preset-description").value = "";
    $("preset-replace-field").hidden = true;
  }
  $("preset-dialog").showModal();
  (mode === "edit" ? $("preset-description") : name).focus();
}

async function savePreset(event) {
  event.preventDefault();
  const message = $("preset-message");
  const name = $("preset-name").value.trim();
  const description = $("preset-description").value;
  const issues = checkPreset(name, description);
  if (issues.length) {
    message.textContent = issues.map((issue) => issue.message).join(" ");
    message.hidden = false;
    return;
  }
  const body = description.trim() ? { description } : {};
  try {
    if (presetMode === "edit") {
      const preset = selectedPreset();
      const template = $("preset-replace").checked ? templateFromValues(readValues()) : preset.template;
      await api.replacePreset(name, { ...body, template });
    } else {
      await api.createPreset({ name, ...body, template: templateFromValues(readValues()) });
    }
  } catch (error) {
    const details = error instanceof ApiError ? error.issues.map((issue) => `${issue.field}: ${issue.message}`) : [];
    message.textContent = [describeError(error), ...details].join(" ");
    message.hidden = false;
    return;
  }
  $("preset-dialog").close();
  await loadPresets(name);
  toast(presetMode === "edit" ? `Preset ${name} updated.` : `Preset ${name} saved.`);
}

async function deletePreset() {
  const preset = selectedPreset();
  if (!preset) return;
  const confirmed = await confirmAction("Delete preset", `Delete the preset ${preset.name}? This cannot be undone.`, "Delete");
  if (!confirmed) return;
  try {
    await api.deletePreset(preset.name);
    toast(`Preset ${preset.name} deleted.`);
  } catch (error) {
    toast(`The preset could not be deleted: ${describeError(error)}`);
  }
  await loadPresets("");
}

function wirePresets() {
  $("preset-select").addEventListener("change", updatePresetButtons);
  $("preset-apply").addEventListener("click", applyPreset);
  $("preset-save").addEventListener("click", () => openPresetDialog("create"));
  $("preset-edit").addEventListener("click", () => openPresetDialog("edit"));
  $("preset-delete").addEventListener("click", deletePreset);
  $("preset-form").addEventListener("submit", savePreset);
}

// -- library ------------------------------------------------------------------------------

function sortJobs(a, b) {
  if (a.created !== b.created) return b.created - a.created;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

function firstArtifact(job) {
  const data = job && job.result && Array.isArray(job.result.data) ? job.result.data : [];
  return data.find((item) => item.type === "artifact") || null;
}

class Library {
  constructor() {
    this.summaries = new Map();
    this.details = new Map();
    this.cards = new Map();
    this.previews = new Map();
    this.cursor = null;
    this.olderLoaded = false;
    this.generation = 0;
    this.timer = null;
    this.refreshing = null;
    this.pending = false;
    this.lastError = "";
  }

  filters() {
    const search = $("search").value.trim();
    return {
      status: $("status-filter").value || undefined,
      favorite: $("favorites-filter").checked,
      hidden: $("hidden-filter").checked,
      search: search || undefined,
    };
  }

  ordered() {
    return [...this.summaries.values()].sort(sortJobs);
  }

  anyActive() {
    for (const summary of this.summaries.values()) if (ACTIVE.has(summary.status)) return true;
    return false;
  }

  /** Start over with the current filters (after a filter change). */
  reset() {
    this.generation += 1;
    this.summaries.clear();
    this.cursor = null;
    this.olderLoaded = false;
    return this.refresh();
  }

  /** Reload the first page; a call during a reload runs one more reload after it. */
  refresh() {
    if (this.refreshing) {
      this.pending = true;
      return this.refreshing;
    }
    $("job-list").setAttribute("aria-busy", "true");
    this.refreshing = (async () => {
      do {
        this.pending = false;
        await this._refresh();
      } while (this.pending);
    })().finally(() => {
      this.refreshing = null;
      $("job-list").setAttribute("aria-busy", "false");
      this.schedule();
    });
    return this.refreshing;
  }

  async _refresh() {
    const generation = this.generation;
    const filters = this.filters();
    if (filters.search && utf8Length(filters.search) > SEARCH_MAX_BYTES) {
      $("library-status").textContent = `Searches are limited to ${SEARCH_MAX_BYTES} bytes.`;
      return;
    }
    let page;
    try {
      page = await api.listJobs({ ...filters, limit: PAGE_SIZE });
    } catch (error) {
      if (generation === this.generation) this.showError(error);
      return;
    }
    if (generation !== this.generation) return;
    const fresh = new Map(page.items.map((item) => [item.id, item]));
    const last = page.items[page.items.length - 1];
    for (const [id, summary] of this.summaries) {
      if (fresh.has(id)) continue;
      const older = last && page.next_cursor && this.olderLoaded && sortJobs(summary, last) > 0;
      if (!older) this.summaries.delete(id);
    }
    for (const item of page.items) this.summaries.set(item.id, item);
    if (!this.olderLoaded) this.cursor = page.next_cursor || null;
    const stale = [...this.summaries.values()].filter((item) => ACTIVE.has(item.status) && !fresh.has(item.id));
    await Promise.all(stale.map((item) => this.reloadJob(item.id, generation)));
    await this.loadDetails(generation);
    if (generation !== this.generation) return;
    this.lastError = "";
    this.render();
  }

  async loadOlder() {
    if (!this.cursor) return;
    const generation = this.generation;
    const button = $("load-older");
    button.disabled = true;
    try {
      const page = await api.listJobs({ ...this.filters(), limit: PAGE_SIZE, cursor: this.cursor });
      if (generation !== this.generation) return;
      for (const item of page.items) this.summaries.set(item.id, item);
      this.cursor = page.next_cursor || null;
      this.olderLoaded = true;
      await this.loadDetails(generation);
      this.render();
    } catch (error) {
      this.showError(error);
    } finally {
      button.disabled = false;
    }
  }

  async reloadJob(id, generation = this.generation) {
    try {
      const job = await api.getJob(id);
      if (generation !== this.generation) return job;
      this.details.set(id, job);
      if (this.summaries.has(id)) this.summaries.set(id, job);
      return job;
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) this.summaries.delete(id);
      return null;
    }
  }

  async loadDetails(generation) {
    const wanted = this.ordered().filter((summary) => {
      const detail = this.details.get(summary.id);
      return !detail || detail.updated !== summary.updated || detail.status !== summary.status;
    });
    let next = 0;
    const worker = async () => {
      while (next < wanted.length && generation === this.generation) {
        const summary = wanted[next];
        next += 1;
        try {
          this.details.set(summary.id, await api.getJob(summary.id));
        } catch {
          // the card shows what the summary knows; the next poll tries again
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(DETAIL_CONCURRENCY, wanted.length) }, worker));
  }

  showError(error) {
    const text = error instanceof ApiError && error.status === 401 ? "Authentication is required to show the history." : `The history could not be loaded: ${describeError(error)}`;
    this.lastError = text;
    $("library-status").textContent = text;
  }

  delay() {
    const active = this.anyActive();
    if (document.hidden) return active ? POLL_HIDDEN_MS : POLL_IDLE_MS;
    return active ? POLL_ACTIVE_MS : POLL_IDLE_MS;
  }

  schedule(delay = this.delay()) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.poll(), delay);
  }

  poll() {
    if (state.paused) {
      this.schedule(POLL_IDLE_MS);
      return;
    }
    this.refresh();
    jobDialog.refreshIfActive();
  }

  // -- rendering -----------------------------------------------------------------------
  render() {
    const list = $("job-list");
    const jobs = this.ordered();
    const shown = new Set(jobs.map((job) => job.id));
    for (const [id, card] of this.cards) {
      if (shown.has(id)) continue;
      card.node.remove();
      this.cards.delete(id);
      this.dropPreview(id);
      if (card.imageKey.startsWith("thumb:")) blobs.drop(card.imageKey);
    }
    for (const id of this.details.keys()) {
      if (!shown.has(id) && id !== jobDialog.id) this.details.delete(id);
    }
    jobs.forEach((summary, index) => {
      let card = this.cards.get(summary.id);
      if (!card) {
        card = this.createCard(summary.id);
        this.cards.set(summary.id, card);
      }
      this.updateCard(card, summary, this.details.get(summary.id));
      if (list.children[index] !== card.node) list.insertBefore(card.node, list.children[index] || null);
    });
    $("load-older").hidden = !this.cursor;
    // The library may learn first that the job on show has changed (it finished while
    // polls slowed down, say): the dialog follows instead of waiting for its own poll.
    const shownDetail = jobDialog.id ? this.details.get(jobDialog.id) : null;
    if (shownDetail && jobDialog.job && shownDetail !== jobDialog.job && (shownDetail.updated !== jobDialog.job.updated || shownDetail.status !== jobDialog.job.status)) jobDialog.update(shownDetail);
    const count = jobs.length;
    $("library-status").textContent = this.lastError || (count ? `Showing ${plural(count, "job")}${this.cursor ? "; older jobs are available" : ""}.` : "No jobs match these filters yet.");
  }

  createCard(id) {
    const image = h("img", { alt: "", hidden: true, loading: "lazy", decoding: "async" });
    const placeholder = h("span", { class: "placeholder", text: "No image yet" });
    const status = h("span", { class: "badge" });
    const favorite = h("span", { class: "fav-mark", title: "Favorite", "aria-label": "Favorite", text: "★", hidden: true });
    const time = h("time", { class: "muted" });
    const prompt = h("p", { class: "prompt" });
    const meta = h("p", { class: "meta muted" });
    const stage = h("p", { class: "stage muted" });
    const details = h("button", { type: "button", onclick: () => jobDialog.open(id), text: "Details" });
    const favoriteButton = h("button", { type: "button", class: "favorite", onclick: () => toggleFavorite(id), text: "Favorite" });
    const cancel = h("button", { type: "button", class: "danger", onclick: () => cancelJob(id), text: "Cancel" });
    const hide = h("button", { type: "button", onclick: () => toggleHidden(id) });
    const node = h(
      "li",
      { class: "card", dataset: { id } },
      h("div", { class: "thumb" }, image, placeholder),
      h("div", { class: "card-body" }, h("div", { class: "card-head" }, status, favorite, time), prompt, meta, stage),
      h("div", { class: "card-actions" }, details, favoriteButton, cancel, hide),
    );
    return { node, image, placeholder, status, favorite, time, prompt, meta, stage, favoriteButton, cancel, hide, imageKey: "" };
  }

  updateCard(card, summary, detail) {
    const job = detail && detail.id === summary.id ? { ...detail, ...summary } : summary;
    card.node.dataset.status = summary.status;
    card.status.textContent = summary.status;
    card.status.dataset.status = summary.status;
    card.favorite.hidden = !summary.favorite;
    card.time.textContent = formatTime(summary.created);
    card.time.setAttribute("datetime", new Date(summary.created * 1000).toISOString());
    const request = detail && detail.request;
    const prompt = request ? request.prompt : "";
    card.prompt.textContent = prompt || "…";
    card.prompt.title = prompt;
    const result = detail && detail.result;
    const routed = request && request.routing && request.routing.provider;
    const failedOn = detail && detail.error && detail.error.provider;
    const provider = result ? result.provider : failedOn || routed || "default provider";
    const model = result ? result.model : request && request.routing && request.routing.model ? request.routing.model : "";
    const outputs = result ? plural(result.data.length, "image") : request ? `${plural((request.parameters && request.parameters.n) || 1, "image")} requested` : "";
    card.meta.textContent = [provider, model, outputs].filter(Boolean).join(" · ");
    const progress = summary.progress;
    let stage = progress ? progress.stage.replace(/_/g, " ") : summary.status === "queued" ? "waiting for a worker" : "";
    if (progress && progress.partial_images) stage += ` · ${plural(progress.partial_images, "preview")}`;
    if (detail && detail.cancel_requested && ACTIVE.has(summary.status)) stage = "cancellation requested";
    if (detail && detail.error) stage = `${detail.error.code}: ${detail.error.message}`;
    card.stage.textContent = stage;
    card.stage.classList.toggle("error-text", Boolean(detail && detail.error));
    card.favoriteButton.setAttribute("aria-pressed", summary.favorite ? "true" : "false");
    card.favoriteButton.title = summary.favorite ? "Remove from favorites" : "Add to favorites";
    card.cancel.hidden = !ACTIVE.has(summary.status);
    card.cancel.disabled = Boolean(detail && detail.cancel_requested);
    card.hide.hidden = ACTIVE.has(summary.status);
    card.hide.textContent = summary.deleted ? "Restore" : "Hide";
    this.updateCardImage(card, job);
  }

  updateCardImage(card, job) {
    const artifact = firstArtifact(job);
    if (artifact) {
      this.dropPreview(job.id);
      const key = `thumb:${artifact.id}`;
      if (card.imageKey === key) return;
      card.imageKey = key;
      blobs.get(key, () => api.thumbnail(artifact.id, CARD_THUMBNAIL_EDGE)).then((url) => {
        if (card.imageKey !== key || !url) return;
        card.image.src = url;
        card.image.alt = `Result of: ${job.request ? job.request.prompt.slice(0, 120) : job.id}`;
        card.image.hidden = false;
        card.placeholder.hidden = true;
      }, () => {
        card.placeholder.textContent = "Image unavailable";
      });
      return;
    }
    const progress = job.progress;
    if (job.status === "running" && progress && progress.partial_images > 0) {
      this.updatePreview(card, job.id, progress.partial_images);
      return;
    }
    if (!ACTIVE.has(job.status)) {
      this.dropPreview(job.id);
      if (card.imageKey) {
        card.imageKey = "";
        card.image.removeAttribute("src");
      }
    }
    if (!card.imageKey) {
      card.placeholder.textContent = ACTIVE.has(job.status) ? "Working…" : "No image";
      card.placeholder.hidden = false;
      card.image.hidden = true;
    }
  }

  async updatePreview(card, id, count) {
    const known = this.previews.get(id);
    if (known && known.count === count) return;
    const entry = { count, url: known ? known.url : null };
    this.previews.set(id, entry);
    let blob = null;
    try {
      blob = await api.partialPreview(id);
    } catch {
      blob = null;
    }
    if (!blob || this.previews.get(id) !== entry) return;
    if (entry.url) URL.revokeObjectURL(entry.url);
    entry.url = URL.createObjectURL(blob);
    if (card.imageKey.startsWith("thumb:")) return;
    card.imageKey = `preview:${id}`;
    card.image.src = entry.url;
    card.image.alt = "Partial preview";
    card.image.hidden = false;
    card.placeholder.hidden = true;
    card.node.classList.add("previewing");
    jobDialog.showPreview(id, entry.url);
  }

  dropPreview(id) {
    const entry = this.previews.get(id);
    if (!entry) return;
    this.previews.delete(id);
    const card = this.cards.get(id);
    if (card) card.node.classList.remove("previewing");
    if (entry.url) setTimeout(() => URL.revokeObjectURL(entry.url), 1000);
  }

  previewUrl(id) {
    const entry = this.previews.get(id);
    return entry ? entry.url : null;
  }

  remember(job) {
    this.details.set(job.id, job);
    if (this.summaries.has(job.id)) this.summaries.set(job.id, job);
    this.render();
  }
}

const library = new Library();

async function toggleFavorite(id) {
  const current = library.summaries.get(id) || library.details.get(id);
  if (!current) return;
  try {
    const job = await api.updateJob(id, { favorite: !current.favorite });
    library.remember(job);
    jobDialog.update(job);
    toast(job.favorite ? "Marked as favorite." : "Removed from favorites.");
    if ($("favorites-filter").checked && !job.favorite) await library.refresh();
  } catch (error) {
    toast(`The job could not be updated: ${describeError(error)}`);
  }
}

async function toggleHidden(id) {
  const current = library.summaries.get(id) || library.details.get(id);
  if (!current) return;
  const hide = !current.deleted;
  try {
    const job = await api.updateJob(id, { deleted: hide });
    library.remember(job);
    jobDialog.update(job);
    toast(hide ? "Job hidden. Tick Hidden only to find it again." : "Job restored.");
    await library.refresh();
  } catch (error) {
    toast(`The job could not be updated: ${describeError(error)}`);
  }
}

async function cancelJob(id) {
  const confirmed = await confirmAction(
    "Cancel job",
    "Cancellation is best effort: the provider may already have done (and charged for) the work, and a finished image can still arrive.",
    "Cancel job",
  );
  if (!confirmed) return;
  try {
    const job = await api.cancelJob(id);
    library.remember(job);
    jobDialog.update(job);
    toast(job.status === "cancelled" ? "Job cancelled." : "Cancellation requested.");
    await library.refresh();
  } catch (error) {
    toast(`The job could not be cancelled: ${describeError(error)}`);
  }
}

function wireLibrary() {
  let debounce = null;
  $("search").addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => library.reset(), SEARCH_DEBOUNCE_MS);
  });
  for (const id of ["status-filter", "favorites-filter", "hidden-filter"]) $(id).addEventListener("change", () => library.reset());
  $("load-older").addEventListener("click", () => library.loadOlder());
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) library.schedule(POLL_VISIBLE_MS);
    else library.schedule();
  });
}

// -- job detail dialog --------------------------------------------------------------------

class JobDialog {
  constructor() {
    this.id = null;
    this.job = null;
    this.previewFigure = null;
    this.imageKeys = [];
  }

  get dialog() {
    return $("job-dialog");
  }

  async open(id) {
    this.id = id;
    this.job = library.details.get(id) || null;
    if (this.job) this.render();
    else $("job-dialog-body").replaceChildren(h("p", { class: "muted", text: "Loading…" }));
    if (!this.dialog.open) this.dialog.showModal();
    const job = await library.reloadJob(id);
    if (this.id !== id) return;
    if (job) {
      this.job = job;
      this.render();
      library.render();
    } else if (!this.job) {
      $("job-dialog-body").replaceChildren(h("p", { class: "error-text", text: "This job is no longer available." }));
    }
  }

  close() {
    this.id = null;
    this.job = null;
    this.previewFigure = null;
    for (const key of this.imageKeys) blobs.drop(key);
    this.imageKeys = [];
  }

  async refreshIfActive() {
    if (!this.id || !this.dialog.open || !this.job || !ACTIVE.has(this.job.status)) return;
    const job = await library.reloadJob(this.id);
    if (job && this.id === job.id) {
      this.job = job;
      this.render();
    }
  }

  update(job) {
    if (this.id !== job.id || !this.dialog.open) return;
    this.job = job;
    this.render();
  }

  showPreview(id, url) {
    if (this.id !== id || !this.previewFigure) return;
    const image = this.previewFigure.querySelector("img");
    image.src = url;
    this.previewFigure.hidden = false;
  }

  renderActions(job) {
    const actions = [
      h("button", { type: "button", class: "favorite", onclick: () => toggleFavorite(job.id), "aria-pressed": job.favorite ? "true" : "false", title: job.favorite ? "Remove from favorites" : "Add to favorites", text: "Favorite" }),
    ];
    if (ACTIVE.has(job.status)) actions.push(h("button", { type: "button", class: "danger", disabled: job.cancel_requested, onclick: () => cancelJob(job.id), text: job.cancel_requested ? "Cancellation requested" : "Cancel" }));
    else actions.push(h("button", { type: "button", onclick: () => toggleHidden(job.id), text: job.deleted ? "Restore" : "Hide" }));
    $("job-dialog-actions").replaceChildren(...actions);
  }

  render() {
    const job = this.job;
    if (!job) return;
    $("job-dialog-title").textContent = `Job ${job.status}`;
    this.renderActions(job);
    const request = job.request || {};
    const result = job.result || null;
    const parameters = request.parameters || {};
    const effective = result ? result.effective : null;
    const sections = [];

    sections.push(this.images(job));
    sections.push(h("section", {}, h("h3", { text: "Prompt" }), h("p", { class: "prose", text: request.prompt || "" })));
    if (request.negative_prompt) sections.push(h("section", {}, h("h3", { text: "Negative prompt" }), h("p", { class: "prose", text: request.negative_prompt })));
    if (result && result.revised_prompt) sections.push(h("section", {}, h("h3", { text: "Revised prompt" }), h("p", { class: "prose", text: result.revised_prompt })));
    if (job.error) sections.push(errorPanel(job.error));

    const timings = result ? result.timings : {};
    const size = effective ? effective.size : parameters.size || "auto";
    sections.push(
      h(
        "section",
        {},
        h("h3", { text: "Metadata" }),
        definitionList([
          ["Status", job.status],
          ["Created", formatTime(job.created)],
          job.started ? ["Started", formatTime(job.started)] : null,
          job.completed ? ["Completed", formatTime(job.completed)] : null,
          ["Provider", result ? result.provider : (request.routing && request.routing.provider) || "default"],
          ["Model", result ? result.model : (request.routing && request.routing.model) || "default"],
          ["Operation", request.operation],
          ["Progress", job.progress ? `${job.progress.stage.replace(/_/g, " ")}` : "–"],
          ["Cancel requested", job.cancel_requested ? "yes" : "no"],
          ["Outputs", result ? `${result.data.length} of ${(effective && effective.n) || parameters.n || 1}` : `${parameters.n || 1} requested`],
          ["Size", size],
          ["Quality", (effective || parameters).quality || "auto"],
          ["Format", (effective || parameters).output_format || "png"],
          ["Queue time", formatMs(timings.queue_ms)],
          ["Input time", formatMs(timings.input_ms)],
          ["Provider time", formatMs(timings.provider_ms)],
          ["Artifact time", formatMs(timings.artifact_ms)],
          ["Total time", formatMs(timings.total_ms)],
          ["Partial images", job.progress ? String(job.progress.partial_images) : "0"],
        ]),
      ),
    );
    if (result) {
      sections.push(parameterTable(result.requested, result.effective));
      if (result.normalizations && result.normalizations.length) {
        sections.push(
          h(
            "section",
            {},
            h("h3", { text: "Normalizations" }),
            table(
              ["Field", "Requested", "Effective", "Reason"],
              result.normalizations.map((item) => [item.field, showValue(item.requested), showValue(item.effective), item.reason]),
            ),
          ),
        );
      }
      if (result.attempts && result.attempts.length) {
        sections.push(
          h(
            "section",
            {},
            h("h3", { text: "Provider attempts" }),
            table(["Provider", "Model", "Outcome", "Error", "Duration"], result.attempts.map((item) => [item.provider, item.model || "–", item.outcome, item.error_code || "–", formatMs(item.duration_ms)])),
          ),
        );
      }
      if (result.warnings && result.warnings.length) {
        sections.push(h("section", {}, h("h3", { text: "Warnings" }), h("ul", {}, result.warnings.map((warning) => h("li", { text: warning.replace(/_/g, " ") })))));
      }
      if (result.failures && result.failures.length) {
        sections.push(
          h(
            "section",
            {},
            h("h3", { text: "Failed outputs" }),
            table(["Output", "Code", "Message"], result.failures.map((item) => [String(item.index), item.error.code, item.error.message])),
          ),
        );
      }
    }
    sections.push(h("details", { class: "raw" }, h("summary", { text: "Raw metadata" }), h("pre", {}, h("code", { text: JSON.stringify(redactInputs(job), null, 2) }))));
    $("job-dialog-body").replaceChildren(...sections);
  }

  images(job) {
    const section = h("section", { class: "images" }, h("h3", { text: "Images" }));
    const data = job.result ? job.result.data.filter((item) => item.type === "artifact") : [];
    const preview = library.previewUrl(job.id);
    this.previewFigure = h(
      "figure",
      { class: "preview", hidden: !(ACTIVE.has(job.status) && preview) },
      h("img", { alt: "Latest partial preview", src: preview || null }),
      h("figcaption", { text: "Live partial preview" }),
    );
    section.append(this.previewFigure);
    if (!data.length && !ACTIVE.has(job.status)) section.append(h("p", { class: "muted", text: "This job has no images." }));
    if (!data.length && ACTIVE.has(job.status) && !preview) section.append(h("p", { class: "muted", text: "Images appear here when the job finishes." }));
    const grid = h("div", { class: "image-grid" });
    for (const item of data) grid.append(this.figure(item));
    section.append(grid);
    return section;
  }

  figure(item) {
    // The dialog shows a 1024-px preview; the full image (possibly tens of MB) is fetched
    // only when the user opens or downloads it.
    const previewKey = `detail:${item.id}`;
    const fullKey = `full:${item.id}`;
    for (const key of [previewKey, fullKey]) if (!this.imageKeys.includes(key)) this.imageKeys.push(key);
    const full = () => blobs.get(fullKey, () => api.artifact(item.id));
    const image = h("img", { alt: `Output ${item.index + 1}: ${item.name}`, width: item.width, height: item.height });
    const open = h("button", { type: "button", class: "image-button", title: "Open the full image in a new tab" }, image);
    open.addEventListener("click", () => openFullImage(full));
    const download = h("button", { type: "button", text: "Download", onclick: () => downloadFullImage(full, item.name.split("/").pop()) });
    const copy = h("button", { type: "button", text: "Copy path", onclick: () => copyText(item.name) });
    blobs.get(previewKey, () => api.thumbnail(item.id, DETAIL_PREVIEW_EDGE)).then((url) => {
      if (url) image.src = url;
    }, () => {
      image.alt = `Output ${item.index + 1} could not be loaded`;
    });
    return h(
      "figure",
      { class: "output" },
      open,
      h("figcaption", {}, h("span", { class: "path", text: item.name }), h("span", { class: "muted", text: `${item.width}×${item.height} · ${item.format} · ${formatBytes(item.bytes)}` })),
      h("div", { class: "figure-actions" }, copy, download),
    );
  }
}

/** Open a full image in a new tab: the tab opens at once (so no popup blocker objects),
 *  then shows the authenticated blob once it has arrived. */
async function openFullImage(load) {
  const tab = window.open("", "_blank");
  if (tab) tab.opener = null;
  try {
    const url = await load();
    if (!url) throw new Error("the image is no longer available");
    if (tab) tab.location.replace(url);
    else window.location.assign(url);
  } catch (error) {
    if (tab) tab.close();
    toast(`The image could not be opened: ${describeError(error)}`);
  }
}

async function downloadFullImage(load, filename) {
  try {
    const url = await load();
    if (!url) throw new Error("the image is no longer available");
    const link = h("a", { href: url, download: filename, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
  } catch (error) {
    toast(`The image could not be downloaded: ${describeError(error)}`);
  }
}

function showValue(value) {
  if (value === undefined) return "–";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function redactInputs(job) {
  const copy = JSON.parse(JSON.stringify(job));
  const request = copy.request || {};
  const strip = (input) => {
    if (input && input.data_url) input.data_url = `${input.data_url.slice(0, input.data_url.indexOf(",") + 1)}… (${input.data_url.length} characters)`;
    if (input && input.data) input.data = `… (${input.data.length} characters)`;
  };
  for (const list of [request.images, request.reference_images]) if (Array.isArray(list)) list.forEach(strip);
  if (request.mask) strip(request.mask);
  return copy;
}

function parameterTable(requested, effective) {
  const keys = [...new Set([...Object.keys(requested || {}), ...Object.keys(effective || {})])];
  const rows = keys.map((key) => {
    const before = showValue((requested || {})[key]);
    const after = showValue((effective || {})[key]);
    const changed = before !== after;
    return { cells: [key, before, changed ? h("span", {}, after, h("span", { class: "visually-hidden", text: " (changed)" })) : after], changed };
  });
  return h(
    "section",
    {},
    h("h3", { text: "Requested and effective parameters" }),
    table(["Parameter", "Requested", "Effective"], rows.map((row) => row.cells), { rowClass: (index) => (rows[index].changed ? "changed" : null) }),
  );
}

function errorPanel(error) {
  return h(
    "section",
    { class: "error-panel" },
    h("h3", { text: "Error" }),
    h("p", {}, h("strong", { text: error.code }), ` ${error.message}`),
    h("p", { class: "muted", text: error.retryable ? "Retrying may help." : "Retrying the same request will not help." }),
    error.suggestions && error.suggestions.length ? h("ul", { class: "suggestions" }, error.suggestions.map((text) => h("li", { text }))) : null,
  );
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    toast(`Copied ${text}`);
  } catch {
    toast(`Copy this path: ${text}`);
  }
}

const jobDialog = new JobDialog();

function wireJobDialog() {
  $("job-dialog").addEventListener("close", () => jobDialog.close());
}

// -- system dialog ------------------------------------------------------------------------

async function loadDiagnostics() {
  const diagnostics = await api.diagnostics();
  state.diagnostics = diagnostics;
  state.defaultProvider = diagnostics.configuration.default_provider || state.defaultProvider;
  if (diagnostics.configuration.authentication_required) $("auth-button").hidden = false;
  if (api.state === "online") setConnection("online", connectionText());
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
  $("sys-summary").replaceChildren(...parts);
  $("sys-events").replaceChildren(
    diagnostics.events.items.length
      ? table(["Time", "Method", "Route", "Status", "Duration"], diagnostics.events.items.map((item) => [new Date(item.timestamp_ms).toLocaleTimeString(), item.method, item.route, String(item.status), formatMs(item.duration_ms)]))
      : h("p", { class: "muted", text: "No requests recorded yet." }),
  );
  renderProvenance(diagnostics);
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
  for (const descriptor of state.providers) {
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

async function openSystem() {
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

function wireSystem() {
  $("system-button").addEventListener("click", openSystem);
  $("session-form").addEventListener("submit", lookupSession);
  $("sys-config-defaults").addEventListener("change", () => state.diagnostics && renderProvenance(state.diagnostics));
}

// -- start --------------------------------------------------------------------------------

function wireDialogs() {
  for (const button of document.querySelectorAll("[data-close]")) {
    button.addEventListener("click", () => button.closest("dialog").close());
  }
}

async function reloadAll() {
  state.capabilityCache.clear();
  const diagnostics = loadDiagnostics().catch(() => null);
  const results = await Promise.allSettled([loadProviders(diagnostics), loadPresets(), library.reset()]);
  const failed = results.find((result) => result.status === "rejected");
  if (failed && !(failed.reason instanceof ApiError && failed.reason.status === 401)) {
    toast(`Some data could not be loaded: ${describeError(failed.reason)}`);
  }
  if ($("system-dialog").open) openSystem();
}

function start() {
  wireDialogs();
  wireAuth();
  wireComposer();
  wirePresets();
  wireLibrary();
  wireJobDialog();
  wireSystem();
  $("refresh-button").addEventListener("click", () => {
    state.paused = false;
    reloadAll();
  });
  writeValues(defaultValues());
  applyDynamicRules();
  reloadAll();
}

start();
