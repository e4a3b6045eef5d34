// The composer's rules, free of the DOM: form values in, an ImageRequest out, and back.
//
// Values are what the form's controls hold (strings, and booleans for checkboxes),
// keyed by the controls' names. A key that is absent means "not sent" (the control was
// disabled because the provider or the operation does not allow it). Only what differs
// from the bridge's defaults is sent. The checks before sending are checks.js; how a
// provider's capability document shapes the form is capabilities.js.

export const MAX_FALLBACKS = 4;
export const DEFAULT_MAX_IMAGES = 16;
export const PRESET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const PRESET_DESCRIPTION_MAX = 512;
export const SIZE_PRESETS = ["auto", "1024x1024", "1536x1024", "1024x1536", "512x512"];
export const IMAGE_TYPES = ["image/png", "image/jpeg", "image/webp"];

export const SIZE_RE = /^[1-9][0-9]*x[1-9][0-9]*$/;
export const RATIO_RE = /^[1-9][0-9]*:[1-9][0-9]*$/;
export const KEY_COLOR_RE = /^#?[0-9A-Fa-f]{6}$/;
const PROVIDER_RE = /^[a-z][a-z0-9-]{0,63}$/;
export const FILENAME_RE = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,159}$/;
export const DIRECTORY_PART_RE = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;
// eslint-disable-next-line no-control-regex -- control characters are what it finds
export const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f]/;
export const FORMAT_EXTENSIONS = { png: ["png"], jpeg: ["jpg", "jpeg"], webp: ["webp"] };

/** The form's initial values; compatibility and metadata differ from the wire defaults. */
export function defaultValues() {
  return {
    prompt: "",
    operation: "generate",
    provider: "",
    n: "1",
    negative_prompt: "",
    model: "",
    size: "auto",
    size_custom: "",
    aspect_ratio: "",
    resolution: "",
    quality: "auto",
    output_format: "png",
    output_compression: "",
    background: "auto",
    transparency_mode: "auto",
    key_color: "",
    transparent_threshold: "12",
    opaque_threshold: "96",
    despill: true,
    moderation: "auto",
    partial_images: "0",
    input_fidelity: "",
    action: "auto",
    failure_policy: "fail_fast",
    batch_execution: "auto",
    compatibility: "best_effort",
    negative_prompt_policy: "auto",
    revised_prompt: "include",
    fallbacks: "",
    fallback_policy: "on_unavailable",
    directory: "",
    filename_prefix: "",
    filename: "",
    collision: "error",
    metadata: "sidecar",
    session_mode: "isolated",
    session_key: "",
    thread_id: "",
    timeout_ms: "",
    idempotency_key: "",
    user: "",
  };
}

export function text(values, name) {
  const value = values[name];
  return value === undefined || value === null ? "" : String(value).trim();
}

export function raw(values, name) {
  const value = values[name];
  return value === undefined || value === null ? "" : String(value);
}

export function choice(values, name, fallback) {
  const value = text(values, name);
  return value || fallback;
}

export function integer(value) {
  const trimmed = String(value).trim();
  if (!/^-?[0-9]+$/.test(trimmed)) return NaN;
  return Number.parseInt(trimmed, 10);
}

export function effectiveSize(values) {
  const size = choice(values, "size", "auto");
  return size === "custom" ? text(values, "size_custom") : size;
}

/** Fallback routes from "provider[:model], …"; throws a message for malformed entries. */
export function parseFallbacks(spec) {
  const routes = [];
  for (const part of String(spec || "").split(",")) {
    const entry = part.trim();
    if (!entry) continue;
    const colon = entry.indexOf(":");
    const provider = (colon < 0 ? entry : entry.slice(0, colon)).trim();
    const model = colon < 0 ? "" : entry.slice(colon + 1).trim();
    if (!PROVIDER_RE.test(provider)) {
      throw new Error(`"${entry}" is not provider[:model] (provider names are lowercase letters, digits and dashes).`);
    }
    if (colon >= 0 && !model) throw new Error(`"${entry}" names no model after the colon.`);
    routes.push(model ? { provider, model } : { provider });
  }
  return routes;
}

export function formatFallbacks(routes) {
  return (routes || []).map((route) => (route.model ? `${route.provider}:${route.model}` : route.provider)).join(", ");
}

function requestInputs(inputs) {
  const list = (items) => (items || []).map((item) => {
    const input = { type: "data_url", data_url: item.dataUrl };
    if (item.name) input.filename = item.name;
    return input;
  });
  return { images: list(inputs && inputs.images), mask: inputs && inputs.mask ? list([inputs.mask])[0] : null, references: list(inputs && inputs.references) };
}

function parametersFrom(values) {
  const parameters = {};
  const n = integer(choice(values, "n", "1"));
  if (n !== 1 && !Number.isNaN(n)) parameters.n = n;
  const size = effectiveSize(values);
  if (size && size !== "auto") parameters.size = size;
  const ratio = text(values, "aspect_ratio");
  if (ratio) parameters.aspect_ratio = ratio;
  const resolution = text(values, "resolution");
  if (resolution) parameters.resolution = resolution;
  for (const [name, fallback] of [["quality", "auto"], ["output_format", "png"], ["background", "auto"], ["moderation", "auto"], ["failure_policy", "fail_fast"], ["action", "auto"]]) {
    const value = choice(values, name, fallback);
    if (value !== fallback) parameters[name] = value;
  }
  const compression = text(values, "output_compression");
  if (compression) parameters.output_compression = integer(compression);
  const partials = integer(choice(values, "partial_images", "0"));
  if (partials && !Number.isNaN(partials)) parameters.partial_images = partials;
  const fidelity = text(values, "input_fidelity");
  if (fidelity) parameters.input_fidelity = fidelity;
  return parameters;
}

function routingFrom(values) {
  const routing = {};
  const provider = text(values, "provider");
  if (provider) routing.provider = provider;
  const model = text(values, "model");
  if (model) routing.model = model;
  let fallbacks;
  try {
    fallbacks = parseFallbacks(values.fallbacks);
  } catch {
    fallbacks = [];
  }
  if (fallbacks.length) routing.fallbacks = fallbacks;
  const policy = choice(values, "fallback_policy", "on_unavailable");
  if (policy !== "on_unavailable") routing.fallback_policy = policy;
  return routing;
}

function sessionFrom(values) {
  const mode = choice(values, "session_mode", "isolated");
  if (mode === "persistent") return { mode, key: text(values, "session_key") };
  if (mode === "thread") return { mode, thread_id: text(values, "thread_id") };
  return null;
}

function outputFrom(values) {
  const output = { metadata: choice(values, "metadata", "sidecar") };
  for (const name of ["directory", "filename_prefix", "filename"]) {
    const value = text(values, name);
    if (value) output[name] = value;
  }
  const collision = choice(values, "collision", "error");
  if (collision !== "error") output.collision = collision;
  const transparency = {};
  const mode = choice(values, "transparency_mode", "auto");
  if (mode !== "auto") transparency.mode = mode;
  const key = text(values, "key_color");
  if (key) transparency.key_color = key;
  const low = integer(choice(values, "transparent_threshold", "12"));
  if (low !== 12 && !Number.isNaN(low)) transparency.transparent_threshold = low;
  const high = integer(choice(values, "opaque_threshold", "96"));
  if (high !== 96 && !Number.isNaN(high)) transparency.opaque_threshold = high;
  if (values.despill === false) transparency.despill = false;
  if (Object.keys(transparency).length) output.transparency = transparency;
  return output;
}

function policiesFrom(values) {
  const policies = { compatibility: choice(values, "compatibility", "best_effort") };
  for (const [name, wire, fallback] of [["negative_prompt_policy", "negative_prompt", "auto"], ["revised_prompt", "revised_prompt", "include"], ["batch_execution", "batch_execution", "auto"]]) {
    const value = choice(values, name, fallback);
    if (value !== fallback) policies[wire] = value;
  }
  return policies;
}

/**
 * The native ImageRequest for the form's values and the uploaded inputs
 * ({images, mask, references}, each {dataUrl, name}). Only what differs from the
 * bridge's defaults is sent, plus the dashboard's own defaults (compatibility
 * best_effort, sidecar metadata), so a stored job shows what the user chose.
 */
export function buildRequest(values, inputs = {}) {
  const operation = choice(values, "operation", "generate");
  const request = { operation, prompt: raw(values, "prompt") };
  const negative = raw(values, "negative_prompt");
  if (negative.trim()) request.negative_prompt = negative;
  const files = requestInputs(inputs);
  if (operation === "edit") {
    request.images = files.images;
    if (files.mask) request.mask = files.mask;
  }
  if (files.references.length) request.reference_images = files.references;
  const parameters = parametersFrom(values);
  if (Object.keys(parameters).length) request.parameters = parameters;
  const routing = routingFrom(values);
  if (Object.keys(routing).length) request.routing = routing;
  const session = sessionFrom(values);
  if (session) request.session = session;
  request.output = outputFrom(values);
  request.policies = policiesFrom(values);
  const timeout = text(values, "timeout_ms");
  if (timeout) request.timeout_ms = integer(timeout);
  const key = text(values, "idempotency_key");
  if (key) request.idempotency_key = key;
  const user = text(values, "user");
  if (user) request.user = user;
  return request;
}

/** A preset template from the form: the request without inputs, key or version. */
export function templateFromValues(values) {
  const request = buildRequest(values, {});
  delete request.images;
  delete request.mask;
  delete request.reference_images;
  delete request.idempotency_key;
  if (!request.prompt.trim()) delete request.prompt;
  return request;
}

/** Form values for a stored template (the bridge returns it with defaults expanded). */
export function valuesFromTemplate(template) {
  const values = defaultValues();
  const t = template || {};
  const parameters = t.parameters || {};
  const routing = t.routing || {};
  const session = t.session || {};
  const output = t.output || {};
  const transparency = output.transparency || {};
  const policies = t.policies || {};
  const set = (name, value) => {
    if (value !== undefined && value !== null) values[name] = typeof value === "boolean" ? value : String(value);
  };
  set("prompt", t.prompt);
  set("negative_prompt", t.negative_prompt);
  set("operation", t.operation);
  set("n", parameters.n);
  if (parameters.size !== undefined) {
    if (SIZE_PRESETS.includes(parameters.size)) {
      values.size = parameters.size;
    } else {
      values.size = "custom";
      values.size_custom = String(parameters.size);
    }
  }
  for (const name of ["aspect_ratio", "resolution", "quality", "output_format", "output_compression", "background", "moderation", "partial_images", "failure_policy", "input_fidelity", "action"]) {
    set(name, parameters[name]);
  }
  set("provider", routing.provider);
  set("model", routing.model);
  values.fallbacks = formatFallbacks(routing.fallbacks);
  set("fallback_policy", routing.fallback_policy);
  set("session_mode", session.mode);
  set("session_key", session.key);
  set("thread_id", session.thread_id);
  for (const name of ["directory", "filename_prefix", "filename", "collision", "metadata"]) set(name, output[name]);
  set("transparency_mode", transparency.mode);
  set("key_color", transparency.key_color);
  set("transparent_threshold", transparency.transparent_threshold);
  set("opaque_threshold", transparency.opaque_threshold);
  if (typeof transparency.despill === "boolean") values.despill = transparency.despill;
  set("compatibility", policies.compatibility);
  set("negative_prompt_policy", policies.negative_prompt);
  set("revised_prompt", policies.revised_prompt);
  set("batch_execution", policies.batch_execution);
  set("timeout_ms", t.timeout_ms);
  set("user", t.user);
  return values;
}

