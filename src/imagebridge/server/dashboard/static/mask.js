// The mask painter: a dialog over the edit source where a brush and an eraser (mouse, pen or
// touch, through pointer events) mark where the image may change, with undo and redo,
// invert, clear and a see-through overlay. The mask itself is mask_bitmap.js, at the
// source's exact pixel size; maskPng() turns it into the PNG the edit sends.

import { MaskBitmap } from "./mask_bitmap.js";
import { $, plural } from "./ui.js";

const OVERLAY_COLOR = [255, 56, 96];

let session = null;

/** Show the source as large as the stage allows (small sources are scaled up, so a brush
 *  can be placed precisely), through the CSSOM. */
function fitFrame() {
  if (!session) return;
  const stage = $("mask-stage").getBoundingClientRect();
  const { width, height } = session.bitmap;
  const scale = Math.max(0.01, Math.min((stage.width - 24) / width, (stage.height - 24) / height));
  const frame = $("mask-frame");
  frame.style.width = `${Math.floor(width * scale)}px`;
  frame.style.height = `${Math.floor(height * scale)}px`;
}

function sizeLabel(value) {
  return `${value} px`;
}

function brushRadius() {
  return Number($("mask-size").value) / 2;
}

function tool() {
  return $("mask-eraser").checked ? 0 : 1;
}

/** Image pixel coordinates of a pointer event over the canvas. */
function imagePoint(event) {
  const canvas = $("mask-canvas");
  const rect = canvas.getBoundingClientRect();
  return {
    x: ((event.clientX - rect.left) / rect.width) * canvas.width,
    y: ((event.clientY - rect.top) / rect.height) * canvas.height,
  };
}

function redraw(box) {
  if (!session || !box) return;
  const { bitmap, overlay, context } = session;
  bitmap.drawOverlay(overlay, box, OVERLAY_COLOR);
  context.putImageData(overlay, 0, 0, box.x0, box.y0, box.x1 - box.x0, box.y1 - box.y0);
}

function whole() {
  return { x0: 0, y0: 0, x1: session.bitmap.width, y1: session.bitmap.height };
}

function updateStatus() {
  const { bitmap } = session;
  const painted = bitmap.count();
  const share = (painted / (bitmap.width * bitmap.height)) * 100;
  $("mask-status").textContent = painted
    ? `${share < 0.1 ? "<0.1" : share.toFixed(share < 10 ? 1 : 0)}% of the image may change (${plural(painted, "pixel")} of ${bitmap.width}×${bitmap.height}).`
    : `Nothing painted yet: paint where the ${bitmap.width}×${bitmap.height} image may change.`;
  $("mask-undo").disabled = bitmap.undos.length === 0;
  $("mask-redo").disabled = bitmap.redos.length === 0;
  $("mask-apply").disabled = painted === 0;
}

function moveCursor(event) {
  const cursor = $("mask-cursor");
  if (event.pointerType === "touch") {
    cursor.hidden = true;
    return;
  }
  const canvas = $("mask-canvas");
  const rect = canvas.getBoundingClientRect();
  const frame = $("mask-frame").getBoundingClientRect();
  const diameter = (Number($("mask-size").value) / canvas.width) * rect.width;
  cursor.hidden = false;
  cursor.style.width = `${diameter}px`;
  cursor.style.height = `${diameter}px`;
  cursor.style.left = `${event.clientX - frame.left - diameter / 2}px`;
  cursor.style.top = `${event.clientY - frame.top - diameter / 2}px`;
}

function onPointerDown(event) {
  if (!session || (event.pointerType === "mouse" && event.button !== 0)) return;
  event.preventDefault();
  const canvas = $("mask-canvas");
  canvas.setPointerCapture(event.pointerId);
  const point = imagePoint(event);
  session.stroke = { id: event.pointerId, last: point, value: tool() };
  session.bitmap.begin();
  redraw(session.bitmap.stamp(point.x, point.y, brushRadius(), session.stroke.value));
}

function onPointerMove(event) {
  moveCursor(event);
  const stroke = session && session.stroke;
  if (!stroke || stroke.id !== event.pointerId) return;
  const events = typeof event.getCoalescedEvents === "function" ? event.getCoalescedEvents() : [];
  for (const item of events.length ? events : [event]) {
    const point = imagePoint(item);
    redraw(session.bitmap.line(stroke.last.x, stroke.last.y, point.x, point.y, brushRadius(), stroke.value));
    stroke.last = point;
  }
}

function onPointerUp(event) {
  const stroke = session && session.stroke;
  if (!stroke || stroke.id !== event.pointerId) return;
  session.stroke = null;
  session.bitmap.end();
  updateStatus();
}

function step(action) {
  if (!session) return;
  const box = session.bitmap[action]();
  redraw(box);
  updateStatus();
}

function change(action) {
  if (!session) return;
  session.bitmap[action]();
  redraw(whole());
  updateStatus();
}

function onKey(event) {
  if (!session || event.target.matches("input[type='range']")) return;
  const key = event.key.toLowerCase();
  const command = event.ctrlKey || event.metaKey;
  if (command && key === "z") step(event.shiftKey ? "redo" : "undo");
  else if (command && key === "y") step("redo");
  else if (key === "[" || key === "]") {
    const input = $("mask-size");
    const value = Number(input.value) * (key === "]" ? 1.25 : 0.8);
    input.value = String(Math.round(Math.min(Number(input.max), Math.max(Number(input.min), value))));
    $("mask-size-value").textContent = sizeLabel(input.value);
  } else if (key === "b" && !command) $("mask-brush").checked = true;
  else if (key === "e" && !command) $("mask-eraser").checked = true;
  else return;
  event.preventDefault();
}

/**
 * Paint a mask over `source` ({url, width, height}); `bitmap` continues an earlier mask.
 * Resolves with the MaskBitmap to use (null: no area painted), or undefined when cancelled.
 */
export function paintMask(source, bitmap = null) {
  const dialog = $("mask-dialog");
  const canvas = $("mask-canvas");
  const working = bitmap && bitmap.width === source.width && bitmap.height === source.height ? bitmap : new MaskBitmap(source.width, source.height);
  canvas.width = source.width;
  canvas.height = source.height;
  const context = canvas.getContext("2d");
  session = { bitmap: working, context, overlay: context.createImageData(source.width, source.height), stroke: null, applied: false };
  redraw(whole());
  $("mask-source").src = source.url;
  const size = $("mask-size");
  const longest = Math.max(source.width, source.height);
  size.max = String(Math.max(8, Math.round(longest / 2)));
  if (!bitmap) size.value = String(Math.max(2, Math.round(longest / 12)));
  $("mask-size-value").textContent = sizeLabel(size.value);
  updateStatus();
  dialog.showModal();
  fitFrame();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      const done = session;
      session = null;
      $("mask-source").removeAttribute("src");
      if (!done || !done.applied) resolve(undefined);
      else resolve(done.bitmap.count() ? done.bitmap : null);
    }, { once: true });
  });
}

/** The mask as the PNG the API takes (RGBA at the source's size), as a data URL. */
export function maskPng(bitmap) {
  const canvas = document.createElement("canvas");
  canvas.width = bitmap.width;
  canvas.height = bitmap.height;
  const context = canvas.getContext("2d");
  context.putImageData(new ImageData(bitmap.toRGBA(), bitmap.width, bitmap.height), 0, 0);
  return canvas.toDataURL("image/png");
}

export function wireMask() {
  const canvas = $("mask-canvas");
  canvas.addEventListener("pointerdown", onPointerDown);
  canvas.addEventListener("pointermove", onPointerMove);
  canvas.addEventListener("pointerup", onPointerUp);
  canvas.addEventListener("pointercancel", onPointerUp);
  canvas.addEventListener("pointerleave", () => {
    $("mask-cursor").hidden = true;
  });
  $("mask-size").addEventListener("input", (event) => {
    $("mask-size-value").textContent = sizeLabel(event.target.value);
  });
  $("mask-undo").addEventListener("click", () => step("undo"));
  $("mask-redo").addEventListener("click", () => step("redo"));
  $("mask-invert").addEventListener("click", () => change("invert"));
  $("mask-clear").addEventListener("click", () => change("clear"));
  $("mask-overlay").addEventListener("change", (event) => canvas.classList.toggle("solid", !event.target.checked));
  $("mask-apply").addEventListener("click", () => {
    if (session) session.applied = true;
    $("mask-dialog").close();
  });
  $("mask-dialog").addEventListener("keydown", onKey);
  window.addEventListener("resize", fitFrame);
}
