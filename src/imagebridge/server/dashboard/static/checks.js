// The composer's checks before sending, free of the DOM: what is wrong with the form's
// values, as [{field, message}] where field names the control to fix.
//
// They mirror the bridge's own validation so a mistake is explained before anything is
// sent; the bridge still validates everything itself. The configurable bounds (prompt
// bytes, inputs, timeout, identifiers) are not constants here: the caller passes the
// bridge's own values, which the page reads from the server (limits.js).

import { formatBytes, utf8Length } from "./bytes.js";
import { CONTROL_RE, DIRECTORY_PART_RE, FILENAME_RE, FORMAT_EXTENSIONS, KEY_COLOR_RE, MAX_FALLBACKS, PRESET_DESCRIPTION_MAX, PRESET_NAME, RATIO_RE, SIZE_RE, choice, effectiveSize, formatFallbacks, integer, parseFallbacks, raw, text } from "./form.js";

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

