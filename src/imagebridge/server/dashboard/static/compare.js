// Compare two images (two variants, or an edit's source and result): side by side, or one
// over the other with a slider, with zoom and pan kept in step across both.
//
// openCompare(a, b) takes {label, load, owned} for each side, where load() resolves to an
// object URL or a data URL; with `owned` the view revokes the URL when it closes.

import { ZoomPan } from "./zoom.js";
import { $, describeError, toast } from "./ui.js";

let side = null;
let slider = null;
let owned = [];

function mode() {
  return $("compare-slider-mode").checked ? "slider" : "side";
}

function showMode() {
  const sliding = mode() === "slider";
  $("compare-side").hidden = sliding;
  $("compare-slider").hidden = !sliding;
  side.reset();
  slider.reset();
  updateZoom();
}

function current() {
  return mode() === "slider" ? slider : side;
}

function updateZoom() {
  $("cmp-zoom").textContent = current().label();
}

function moveDivider() {
  const value = Number($("cmp-position").value);
  $("cmp-s-top").style.clipPath = `inset(0 0 0 ${value}%)`;
  $("cmp-s-line").style.left = `${value}%`;
  $("cmp-position").setAttribute("aria-valuetext", `${value}% of the left image shown`);
}

/** Open the compare view on two images; resolves once both are shown. */
export async function openCompare(a, b) {
  const dialog = $("compare-dialog");
  for (const id of ["cmp-a", "cmp-b", "cmp-s-a", "cmp-s-b"]) $(id).removeAttribute("src");
  $("cmp-a-caption").textContent = a.label;
  $("cmp-b-caption").textContent = b.label;
  $("cmp-s-left").textContent = a.label;
  $("cmp-s-right").textContent = b.label;
  $("cmp-a").alt = a.label;
  $("cmp-s-a").alt = a.label;
  $("cmp-b").alt = b.label;
  $("cmp-s-b").alt = b.label;
  if (!dialog.open) dialog.showModal();
  showMode();
  moveDivider();
  try {
    const [urlA, urlB] = await Promise.all([a.load(), b.load()]);
    owned.push(...[[a, urlA], [b, urlB]].filter(([item, url]) => item.owned && url).map(([, url]) => url));
    if (!urlA || !urlB) throw new Error("an image is no longer available");
    $("cmp-a").src = urlA;
    $("cmp-s-a").src = urlA;
    $("cmp-b").src = urlB;
    $("cmp-s-b").src = urlB;
  } catch (error) {
    dialog.close();
    toast(`The images could not be compared: ${describeError(error)}`);
  }
}

export function wireCompare() {
  side = new ZoomPan([$("cmp-a-stage"), $("cmp-b-stage")]);
  slider = new ZoomPan([$("cmp-s-stage")]);
  for (const zoom of [side, slider]) zoom.addEventListener("change", updateZoom);
  for (const input of document.querySelectorAll("input[name='compare-mode']")) input.addEventListener("change", showMode);
  $("cmp-position").addEventListener("input", moveDivider);
  $("cmp-zoom-in").addEventListener("click", () => current().zoomBy(1.25));
  $("cmp-zoom-out").addEventListener("click", () => current().zoomBy(0.8));
  $("cmp-fit").addEventListener("click", () => current().reset());
  $("compare-dialog").addEventListener("close", () => {
    for (const url of owned) URL.revokeObjectURL(url);
    owned = [];
  });
  $("compare-dialog").addEventListener("keydown", (event) => {
    if (event.target.matches("input")) return;
    if (current().key(event)) event.preventDefault();
  });
}
