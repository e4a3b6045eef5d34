// The images a request sends: the edit source (chosen as a file, or "Edit this" from the
// gallery), its mask (a file, or painted over the source with mask.js) and reference images.
// Every file is checked by its first bytes and read as a data URL; nothing larger than the
// provider takes is even read.

import { formatBytes, safeFilename, sniffImageType } from "./bytes.js";
import { afterRules, applyDynamicRules, fieldOf, setHint } from "./composer.js";
import { IMAGE_TYPES } from "./form.js";
import { maskPng, paintMask } from "./mask.js";
import * as store from "./store.js";
import { $, describeError, plural, toast } from "./ui.js";

const DEFAULT_MAX_FILE_BYTES = 32 * 1024 * 1024;
const MASK_PREVIEW_COLOR = [255, 56, 96, 150];

let inputs = { images: [], mask: null, references: [] };
let painted = null; // the MaskBitmap behind a painted mask, to paint on

/** What the next request sends: {images, mask, references}, each {name, size, type, dataUrl}. */
export function selectedInputs() {
  return { images: inputs.images, mask: inputs.mask, references: inputs.references };
}

/** The edit source on show ({name, dataUrl, width, height, …}), or null. */
export function editSource() {
  return inputs.images[0] || null;
}

function describeInputs(name) {
  const items = name === "mask" ? (inputs.mask ? [inputs.mask] : []) : inputs[name];
  if (!items.length) {
    setHint(name, "PNG, JPEG or WebP.");
    return;
  }
  if (name === "mask" && inputs.mask.painted) {
    setHint(name, `Painted mask: ${inputs.mask.share} of the image may change.`);
    return;
  }
  const total = items.reduce((sum, item) => sum + item.size, 0);
  setHint(name, `${plural(items.length, "image")} selected (${formatBytes(total)}).`);
}

function readDataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.addEventListener("load", () => resolve(String(reader.result)));
    reader.addEventListener("error", () => reject(reader.error || new Error("the file could not be read")));
    reader.readAsDataURL(blob);
  });
}

/** The pixel size of an image's bytes (0×0 when the browser cannot decode it). */
async function pixelSize(blob) {
  try {
    const bitmap = await createImageBitmap(blob);
    const size = { width: bitmap.width, height: bitmap.height };
    bitmap.close();
    return size;
  } catch {
    return { width: 0, height: 0 };
  }
}

async function readImage(blob, name) {
  const head = new Uint8Array(await blob.slice(0, 16).arrayBuffer());
  const type = sniffImageType(head);
  if (!IMAGE_TYPES.includes(type)) throw new Error(`${name} is not a PNG, JPEG or WebP image.`);
  const dataUrl = await readDataUrl(blob);
  const payload = dataUrl.slice(dataUrl.indexOf(",") + 1);
  const { width, height } = await pixelSize(blob);
  return { name: safeFilename(name), size: blob.size, type, dataUrl: `data:${type};base64,${payload}`, width, height };
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
    const items = await Promise.all(files.map((file) => readImage(file, file.name)));
    if (name === "mask") {
      inputs.mask = items[0] || null;
      painted = null;
    } else {
      inputs[name] = items;
    }
    if (name === "images") forgetPaintedMask();
    describeInputs(name);
  } catch (error) {
    input.value = "";
    if (name === "mask") inputs.mask = null;
    else inputs[name] = [];
    setHint(name, describeError(error), true);
  }
  showSource();
}

/** A painted mask belongs to one source: a new source drops it. */
function forgetPaintedMask() {
  if (inputs.mask && inputs.mask.painted) inputs.mask = null;
  painted = null;
}

/** Make `blob` (an image of the gallery, say) the edit source and switch to editing. */
export async function setEditSource(blob, name) {
  const item = await readImage(blob, name);
  inputs.images = [item];
  fieldOf("images").value = "";
  fieldOf("mask").value = "";
  inputs.mask = null;
  painted = null;
  fieldOf("operation").value = "edit";
  applyDynamicRules();
  describeInputs("images");
  describeInputs("mask");
  showSource();
  return item;
}

export function clearInputs() {
  for (const name of ["images", "mask", "references"]) fieldOf(name).value = "";
  inputs = { images: [], mask: null, references: [] };
  painted = null;
  showSource();
}

function drawMaskPreview() {
  const canvas = $("source-mask");
  const source = editSource();
  if (!painted || !source || painted.width !== source.width || painted.height !== source.height) {
    canvas.hidden = true;
    return;
  }
  canvas.width = painted.width;
  canvas.height = painted.height;
  const context = canvas.getContext("2d");
  const image = context.createImageData(painted.width, painted.height);
  const [r, g, b, a] = MASK_PREVIEW_COLOR;
  for (let i = 0; i < painted.data.length; i += 1) {
    if (!painted.data[i]) continue;
    image.data.set([r, g, b, a], i * 4);
  }
  context.putImageData(image, 0, 0);
  canvas.hidden = false;
}

function showSource() {
  const source = editSource();
  $("source-view").hidden = !source;
  if (!source) {
    $("source-image").removeAttribute("src");
    return;
  }
  $("source-image").src = source.dataUrl;
  const more = inputs.images.length > 1 ? ` (+${inputs.images.length - 1} more)` : "";
  $("source-caption").textContent = `${source.name || "image"}${more} · ${source.width}×${source.height} · ${formatBytes(source.size)}`;
  $("remove-mask").hidden = !inputs.mask;
  drawMaskPreview();
  updatePaintButton();
}

function updatePaintButton() {
  const mask = fieldOf("mask");
  const button = $("paint-mask");
  const unsupported = mask.dataset.unsupported === "1";
  const source = editSource();
  button.disabled = unsupported || !source || !source.width;
  button.title = unsupported ? mask.title : "";
  button.lastChild.textContent = painted ? "Edit mask" : "Paint mask";
}

async function onPaint() {
  const source = editSource();
  if (!source) return;
  const result = await paintMask({ url: source.dataUrl, width: source.width, height: source.height }, painted);
  if (result === undefined) return;
  if (result === null) {
    forgetPaintedMask();
  } else {
    const dataUrl = maskPng(result);
    const share = (result.count() / (result.width * result.height)) * 100;
    painted = result;
    inputs.mask = { name: "mask.png", size: Math.floor(((dataUrl.length - 22) * 3) / 4), type: "image/png", dataUrl, painted: true, share: `${share < 0.1 ? "<0.1" : share.toFixed(share < 10 ? 1 : 0)}%` };
    fieldOf("mask").value = "";
    toast("Mask ready: the painted area may change.");
  }
  describeInputs("mask");
  showSource();
}

export function wireSources() {
  for (const name of ["images", "mask", "references"]) fieldOf(name).addEventListener("change", onFilesChosen);
  afterRules((isEdit) => {
    for (const name of ["images", "mask"]) {
      if (fieldOf(name).dataset.unsupported === "1") continue;
      if (isEdit) describeInputs(name);
      else setHint(name, "Only used by edits.");
    }
    if (fieldOf("references").dataset.unsupported !== "1") describeInputs("references");
    updatePaintButton();
  });
  $("paint-mask").addEventListener("click", onPaint);
  $("remove-mask").addEventListener("click", () => {
    inputs.mask = null;
    painted = null;
    fieldOf("mask").value = "";
    describeInputs("mask");
    showSource();
  });
  $("clear-source").addEventListener("click", () => {
    inputs.images = [];
    forgetPaintedMask();
    fieldOf("images").value = "";
    describeInputs("images");
    describeInputs("mask");
    showSource();
  });
}
