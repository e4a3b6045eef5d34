// The composer's rules, free of the DOM: form values in, an ImageRequest out.
//
// Values are what the form's controls hold (strings, and booleans for checkboxes),
// keyed by the controls' names. A key that is absent means "not sent" (the control was
// disabled because the provider or the operation does not allow it). The checks mirror
// the bridge's own validation so a mistake is explained before anything is sent; the
// bridge still validates everything itself. The configurable bounds (prompt bytes, inputs,
// timeout, identifiers) are not constants here: the caller passes the bridge's own values,
// which the page reads from the server (limits.js).

export const MAX_FALLBACKS = 4;
export const DEFAULT_MAX_IMAGES = 16;
export const PRESET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const PRESET_DESCRIPTION_MAX = 512;
export const SEARCH_MAX_BYTES = 512;
export const SIZE_PRESETS = ["auto", "1024x1024", "1536x1024", "1024x1536", "512x512"];
export const IMAGE_TYPES = ["image/png", "image/jpeg", "image/webp"];

const SIZE_RE = /^[1-9][0-9]*x[1-9][0-9]*$/;
const RATIO_RE = /^[1-9][0-9]*:[1-9][0-9]*$/;
const KEY_COLOR_RE = /^#?[0-9A-Fa-f]{6}$/;
const PROVIDER_RE = /^[a-z][a-z0-9-]{0,63}$/;
const FILENAME_RE = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,159}$/;
const DIRECTORY_PART_RE = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;
// eslint-disable-next-line no-control-regex -- control characters are what it finds
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f]/;
const FORMAT_EXTENSIONS = { png: ["png"], jpeg: ["jpg", "jpeg"], webp: ["webp"] };

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

export function utf8Length(text) {
  return new TextEncoder().encode(String(text)).length;
}

function text(values, name) {
  const value = values[name];
  return value === undefined || value === null ? "" : String(value).trim();
}

function raw(values, name) {
  const value = values[name];
  return value === undefined || value === null ? "" : String(value);
}

function choice(values, name, fallback) {
  const value = text(values, name);
  return value || fallback;
}

function integer(value) {
  const trimmed = String(value).trim();
  if (!/^-?[0-9]+$/.test(trimmed)) return NaN;
  return Number.parseInt(trimmed, 10);
}

function effectiveSize(values) {
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

function checkIdentifier(issues, values, name, label, maxBytes) {
  const value = raw(values, name);
  if (!value) return;
  if (!value.trim()) issues.push({ field: name, message: `${label} cannot be only spaces.` });
  else if (utf8Length(value) > maxBytes) issues.push({ field: name, message: `${label} is longer than ${maxBytes} bytes.` });
  else if (CONTROL_RE.test(value)) issues.push({ field: name, message: `${label} contains control characters.` });
}

function checkInteger(issues, values, name, label, min, max) {
  const value = text(values, name);
  if (!value) return null;
  const number = integer(value);
  if (Number.isNaN(number) || number < min || number > max) {
    issues.push({ field: name, message: `${label} must be a whole number from ${min} to ${max}.` });
    return null;
  }
  return number;
}

function checkInputs(issues, name, items, limits, label) {
  if (!items.length) return;
  if (limits && limits.support === "unsupported") {
    issues.push({ field: name, message: `This provider does not accept ${label}.` });
    return;
  }
  if (limits && items.length > limits.max_count) {
    issues.push({ field: name, message: `At most ${limits.max_count} ${label} are accepted here.` });
  }
  let total = 0;
  for (const item of items) {
    total += item.size || 0;
    if (limits && item.size > limits.max_bytes_each) {
      issues.push({ field: name, message: `${item.name || "An image"} is larger than ${formatBytes(limits.max_bytes_each)}.` });
    }
  }
  if (limits && total > limits.max_bytes_total) {
    issues.push({ field: name, message: `The ${label} add up to more than ${formatBytes(limits.max_bytes_total)}.` });
  }
}

/**
 * What is wrong with the values before they are sent: [{field, message}], where field
 * names the control to fix. `capabilities` (optional) adds the provider's limits;
 * `limits` are the bridge's request bounds (limits.js `serverLimits()`).
 */
export function checkValues(values, inputs, capabilities, limits) {
  const issues = [];
  const caps = capabilities || null;
  const operation = choice(values, "operation", "generate");
  const images = (inputs && inputs.images) || [];
  const references = (inputs && inputs.references) || [];
  const mask = inputs && inputs.mask ? [inputs.mask] : [];

  const prompt = raw(values, "prompt");
  if (!prompt.trim()) issues.push({ field: "prompt", message: "Enter a prompt." });
  else if (utf8Length(prompt) > limits.prompt_bytes) {
    issues.push({ field: "prompt", message: `The prompt is ${utf8Length(prompt)} bytes; the limit is ${limits.prompt_bytes}.` });
  }
  const negative = raw(values, "negative_prompt");
  if (negative && !negative.trim()) issues.push({ field: "negative_prompt", message: "The negative prompt cannot be only spaces." });
  else if (utf8Length(negative) > limits.negative_prompt_bytes) issues.push({ field: "negative_prompt", message: `The negative prompt is longer than ${limits.negative_prompt_bytes} bytes.` });
  else if (negative.trim() && choice(values, "negative_prompt_policy", "auto") === "reject") {
    issues.push({ field: "negative_prompt", message: "The negative prompt policy is reject: clear the negative prompt or choose another policy." });
  }

  if (operation === "edit" && images.length === 0) issues.push({ field: "images", message: "An edit needs at least one image." });
  if (operation === "edit") {
    checkInputs(issues, "images", images, caps && caps.edit_images, "images to edit");
    checkInputs(issues, "mask", mask, caps && caps.masks, "masks");
  }
  checkInputs(issues, "references", references, caps && caps.reference_images, "reference images");
  const inputCount = references.length + (operation === "edit" ? images.length + mask.length : 0);
  if (inputCount > limits.inputs) issues.push({ field: "references", message: `At most ${limits.inputs} images can be sent in one request.` });

  const maxCount = caps ? caps.count.max : 255;
  const minCount = caps ? caps.count.min : 1;
  const n = checkInteger(issues, values, "n", "Images", minCount, maxCount);

  const size = effectiveSize(values);
  if (choice(values, "size", "auto") === "custom") {
    if (!SIZE_RE.test(size)) issues.push({ field: "size_custom", message: "Write the size as WIDTHxHEIGHT, e.g. 768x512." });
  }
  const ratio = text(values, "aspect_ratio");
  if (ratio && !RATIO_RE.test(ratio)) issues.push({ field: "aspect_ratio", message: "Write the aspect ratio as W:H with positive whole numbers, e.g. 16:9." });
  if (size && size !== "auto" && (ratio || text(values, "resolution"))) {
    issues.push({ field: "size", message: "An explicit size cannot be combined with an aspect ratio or resolution." });
  }

  const format = choice(values, "output_format", "png");
  const compression = checkInteger(issues, values, "output_compression", "Compression", 0, 100);
  if (compression !== null && format === "png") issues.push({ field: "output_compression", message: "Compression applies to JPEG and WebP only." });

  const key = text(values, "key_color");
  if (key && !KEY_COLOR_RE.test(key)) issues.push({ field: "key_color", message: "The chroma key is six hex digits, e.g. #00FF00." });
  const low = checkInteger(issues, values, "transparent_threshold", "The transparent threshold", 0, 255);
  const high = checkInteger(issues, values, "opaque_threshold", "The opaque threshold", 0, 255);
  if (low !== null && high !== null && low >= high) {
    issues.push({ field: "transparent_threshold", message: "The transparent threshold must be below the opaque threshold." });
  }
  const partialMax = caps ? caps.partial_images.max : 3;
  checkInteger(issues, values, "partial_images", "Partial previews", 0, Math.min(3, partialMax));

  if (text(values, "input_fidelity") && images.length + references.length === 0) {
    issues.push({ field: "input_fidelity", message: "Input fidelity needs an input or reference image." });
  }
  const action = choice(values, "action", "auto");
  if (action === "generate" && operation === "edit") issues.push({ field: "action", message: "The generate action cannot be used with an edit." });
  if (action === "edit" && operation === "generate" && references.length === 0) {
    issues.push({ field: "action", message: "The edit action on a generation needs a reference image." });
  }

  const sessionMode = choice(values, "session_mode", "isolated");
  let fallbacks = [];
  try {
    fallbacks = parseFallbacks(values.fallbacks);
  } catch (error) {
    issues.push({ field: "fallbacks", message: error.message });
  }
  if (fallbacks.length > MAX_FALLBACKS) issues.push({ field: "fallbacks", message: `At most ${MAX_FALLBACKS} fallback routes.` });
  const seen = new Set();
  const primary = text(values, "provider");
  const primaryModel = text(values, "model");
  for (const route of fallbacks) {
    const id = `${route.provider}\u0000${route.model || ""}`;
    if (seen.has(id) || (route.provider === primary && (route.model || "") === primaryModel)) {
      issues.push({ field: "fallbacks", message: `The route ${formatFallbacks([route])} is listed twice.` });
    }
    seen.add(id);
  }
  if (fallbacks.length && sessionMode !== "isolated") issues.push({ field: "fallbacks", message: "Fallback routes need an isolated session." });

  const filename = text(values, "filename");
  if (filename) {
    if (n !== null && n !== 1) issues.push({ field: "filename", message: "An exact filename needs exactly one image (Images = 1)." });
    if (!FILENAME_RE.test(filename)) issues.push({ field: "filename", message: "A filename uses letters, digits, dot, dash and underscore, does not start with a dot and has at most 160 characters." });
    else if (filename.includes(".")) {
      const extension = filename.slice(filename.lastIndexOf(".") + 1).toLowerCase();
      if (!(FORMAT_EXTENSIONS[format] || []).includes(extension)) issues.push({ field: "filename", message: `The extension .${extension} does not match the ${format.toUpperCase()} format.` });
    }
    if (text(values, "filename_prefix")) issues.push({ field: "filename_prefix", message: "Use either an exact filename or a filename prefix, not both." });
  }
  if (choice(values, "collision", "error") === "suffix" && !filename) issues.push({ field: "collision", message: "Adding a suffix on collision needs an exact filename." });
  const directory = text(values, "directory");
  if (directory) {
    const parts = directory.split("/");
    if (utf8Length(directory) > 512 || parts.some((part) => !DIRECTORY_PART_RE.test(part))) {
      issues.push({ field: "directory", message: "A directory is a relative path of names made of letters, digits, dot, dash and underscore (no leading dot)." });
    }
  }

  if (sessionMode === "persistent" && !text(values, "session_key")) issues.push({ field: "session_key", message: "A persistent session needs a session key." });
  if (sessionMode === "thread" && !text(values, "thread_id")) issues.push({ field: "thread_id", message: "An explicit thread needs a thread id." });
  if (choice(values, "batch_execution", "auto") === "parallel" && sessionMode !== "isolated") {
    issues.push({ field: "batch_execution", message: "Parallel batches need an isolated session." });
  }
  checkInteger(issues, values, "timeout_ms", "The timeout", 1, limits.timeout_ms);
  checkIdentifier(issues, values, "model", "The model", limits.identifier_bytes);
  checkIdentifier(issues, values, "session_key", "The session key", limits.identifier_bytes);
  checkIdentifier(issues, values, "thread_id", "The thread id", limits.identifier_bytes);
  checkIdentifier(issues, values, "idempotency_key", "The idempotency key", limits.identifier_bytes);
  checkIdentifier(issues, values, "user", "The user", limits.identifier_bytes);
  return issues;
}

/** Problems with a preset's name and description before saving. */
export function checkPreset(name, description) {
  const issues = [];
  if (!PRESET_NAME.test(String(name || ""))) {
    issues.push({ field: "name", message: "A preset name is 1–64 letters, digits, dots, dashes or underscores, starting with a letter or digit." });
  }
  const text = String(description || "");
  if (utf8Length(text) > PRESET_DESCRIPTION_MAX) issues.push({ field: "description", message: `A description has at most ${PRESET_DESCRIPTION_MAX} bytes.` });
  if (CONTROL_RE.test(text.replace(/[\n\t]/g, " "))) issues.push({ field: "description", message: "A description cannot contain control characters." });
  return issues;
}

function supportOf(level) {
  return level === "native" || level === "emulated";
}

/**
 * How the provider's capability document shapes the form: for each control name,
 * {disabled, reason}; for each select, the option values it cannot take with a reason;
 * `locked` lists selects with a single possible value; plus limits for number inputs.
 */
export function constraintsFor(caps, operation = "generate") {
  const controls = {};
  const options = {};
  const locked = {};
  const disable = (name, reason) => {
    controls[name] = { disabled: true, reason };
  };
  const refuse = (name, value, reason) => {
    options[name] = options[name] || {};
    options[name][value] = reason;
  };
  const restrict = (name, allowed, all, noun) => {
    for (const value of all) {
      if (!allowed.includes(value)) refuse(name, value, `This provider does not support ${noun} ${value}.`);
    }
    if (allowed.length === 1) locked[name] = { value: allowed[0], reason: `This provider always uses ${noun} ${allowed[0]}.` };
  };
  if (!caps) return { controls, options, locked, limits: { n: { min: 1, max: DEFAULT_MAX_IMAGES }, partial_images: { min: 0, max: 3 } } };

  if (!caps.generation) refuse("operation", "generate", "This provider does not generate new images.");
  if (!caps.edits) refuse("operation", "edit", "This provider does not edit images.");
  if (caps.aspect_ratio === "unsupported") disable("aspect_ratio", "This provider does not support aspect ratios.");
  if (caps.resolution === "unsupported") disable("resolution", "This provider does not support resolution hints.");
  restrict("quality", caps.qualities, ["auto", "low", "medium", "high"], "quality");
  restrict("output_format", caps.output_formats, ["png", "jpeg", "webp"], "format");
  restrict("background", caps.backgrounds, ["auto", "opaque", "transparent"], "background");
  restrict("moderation", caps.moderation, ["auto", "low"], "moderation");
  restrict("action", caps.actions, ["auto", "generate", "edit"], "action");
  if (!caps.input_fidelities.length) disable("input_fidelity", "This provider does not take an input fidelity.");
  else {
    for (const value of ["low", "high"]) {
      if (!caps.input_fidelities.includes(value)) refuse("input_fidelity", value, `This provider does not support input fidelity ${value}.`);
    }
  }
  if (caps.transparent_background === "unsupported") {
    refuse("background", "transparent", "This provider cannot make transparent backgrounds.");
    for (const name of ["transparency_mode", "key_color", "transparent_threshold", "opaque_threshold", "despill"]) {
      disable(name, "This provider cannot make transparent backgrounds.");
    }
  } else if (caps.transparent_background !== "native") {
    refuse("transparency_mode", "native", "This provider has no native transparency; the bridge keys out a chroma colour instead.");
  }
  if (caps.negative_prompt === "unsupported") {
    disable("negative_prompt", "This provider does not support negative prompts.");
    refuse("negative_prompt_policy", "native", "This provider does not support negative prompts natively.");
  } else if (caps.negative_prompt !== "native") {
    refuse("negative_prompt_policy", "native", "This provider has no native negative prompt; it is merged into the prompt.");
  }
  if (caps.revised_prompt === "unsupported") refuse("revised_prompt", "require", "This provider does not report a revised prompt.");
  if (!supportOf(caps.user_attribution)) disable("user", "This provider does not accept user attribution.");
  if (!caps.persistent_sessions) refuse("session_mode", "persistent", "This provider has no persistent sessions.");
  if (!caps.explicit_threads) refuse("session_mode", "thread", "This provider has no explicit threads.");
  if (!supportOf(caps.masks.support) || caps.masks.max_count === 0) disable("mask", "This provider does not accept masks.");
  if (!supportOf(caps.reference_images.support) || caps.reference_images.max_count === 0) disable("references", "This provider does not accept reference images.");
  if (!supportOf(caps.edit_images.support) || caps.edit_images.max_count === 0) disable("images", "This provider does not accept images to edit.");
  if (caps.partial_images.max === 0) disable("partial_images", "This provider does not stream partial previews.");

  const sizes = caps.sizes || {};
  const allowed = sizes.allowed || [];
  if (!sizes.auto) refuse("size", "auto", "This provider needs an explicit size.");
  if (!sizes.arbitrary) {
    for (const value of SIZE_PRESETS) {
      if (value !== "auto" && !allowed.includes(value)) refuse("size", value, `This provider does not render ${value}.`);
    }
    if (!allowed.some((value) => !SIZE_PRESETS.includes(value))) refuse("size", "custom", "This provider only renders its listed sizes.");
  }
  if (sizes.auto && !sizes.arbitrary && !allowed.length) locked.size = { value: "auto", reason: "This provider always chooses the size itself." };
  if (caps.count.min === caps.count.max) locked.n = { value: String(caps.count.min), reason: `This provider makes exactly ${caps.count.min} image(s).` };
  return {
    controls,
    options,
    locked,
    limits: {
      n: { min: caps.count.min, max: caps.count.max },
      partial_images: { min: caps.partial_images.min, max: Math.min(3, caps.partial_images.max) },
    },
    operation,
  };
}

/** A one-line summary of a capability document, for the composer and the matrix. */
export function describeCapabilities(caps) {
  if (!caps) return "";
  const batching = caps.batching.mode === "native"
    ? "native batches"
    : `fan-out, up to ${caps.batching.max_parallel_outputs} in parallel`;
  const sessions = [caps.persistent_sessions ? "persistent sessions" : "", caps.explicit_threads ? "threads" : ""].filter(Boolean).join(" and ") || "no sessions";
  const count = caps.count.min === caps.count.max ? `${caps.count.max} image` : `${caps.count.min}–${caps.count.max} images`;
  return [
    caps.model || "default model",
    `${count} (${batching})`,
    caps.output_formats.join(", "),
    `transparency ${caps.transparent_background}`,
    sessions,
  ].join(" · ");
}

export function formatBytes(bytes) {
  if (typeof bytes !== "number" || !Number.isFinite(bytes)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} ${units[unit]}` : `${value.toFixed(value >= 10 ? 0 : 1)} ${units[unit]}`;
}

/** The image type of the first bytes of a file, or "" when not PNG, JPEG or WebP. */
export function sniffImageType(bytes) {
  const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  if (b.length >= 8 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47 && b[4] === 0x0d && b[5] === 0x0a && b[6] === 0x1a && b[7] === 0x0a) return "image/png";
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return "image/jpeg";
  if (b.length >= 12 && b[0] === 0x52 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x46 && b[8] === 0x57 && b[9] === 0x45 && b[10] === 0x42 && b[11] === 0x50) return "image/webp";
  return "";
}

/** A file name the bridge accepts as an input's logical filename (no separators or controls). */
export function safeFilename(name) {
  // eslint-disable-next-line no-control-regex -- control characters are what it removes
  const cleaned = String(name || "").replace(/[\\/]/g, "_").replace(/[\u0000-\u001f\u007f-\u009f]/g, "").trim();
  return cleaned.slice(0, 255);
}
