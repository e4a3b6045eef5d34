// Small DOM helpers every view uses: element building, icons, formatting, tables, toasts,
// the confirmation dialog, copying and downloading, and the object URLs of authenticated
// image blobs.
//
// Text from the bridge is only ever set as text, never parsed as HTML.

import { ApiError } from "./api.js";

const TOAST_MS = 4000;

export const $ = (id) => document.getElementById(id);

export function h(tag, props = {}, ...children) {
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

/** An icon of the page's sprite (index.html), hidden from assistive technology: a copy of
 *  the page's icon template pointing at the symbol `#i-<name>`. */
export function icon(name) {
  const svg = $("icon-template").content.firstElementChild.cloneNode(true);
  svg.querySelector("use").setAttribute("href", `#i-${name}`);
  return svg;
}

/** A button with an icon and a visible label (or, with `iconOnly`, the label as its name). */
export function iconButton(name, label, onclick, { iconOnly = false, className = "", ...props } = {}) {
  const classes = [iconOnly ? "icon-button" : "", className].filter(Boolean).join(" ") || null;
  const button = h("button", { type: "button", class: classes, onclick, ...props }, icon(name));
  if (iconOnly) {
    button.setAttribute("aria-label", label);
    button.title = label;
  } else {
    button.append(h("span", { text: label }));
  }
  return button;
}

export function formatTime(seconds) {
  if (typeof seconds !== "number") return "–";
  return new Date(seconds * 1000).toLocaleString();
}

export function formatMs(ms) {
  if (typeof ms !== "number") return "–";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

export function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

export function describeError(error) {
  if (error instanceof ApiError) return error.message;
  return error && error.message ? error.message : String(error);
}

export function table(headers, rows, { caption, rowClass } = {}) {
  // A wide table scrolls inside its wrapper, which the keyboard can therefore reach.
  const name = caption || `Table: ${headers.filter(Boolean).slice(0, 3).join(", ")}`;
  return h(
    "div",
    { class: "table-wrap", tabindex: "0", role: "region", "aria-label": name },
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

export function definitionList(entries) {
  return h(
    "dl",
    { class: "facts" },
    entries.filter(Boolean).map(([term, value]) => [h("dt", { text: term }), h("dd", {}, value instanceof Node ? value : String(value ?? "–"))]),
  );
}

let toastTimer = null;
export function toast(message) {
  const node = $("toast");
  node.textContent = message;
  node.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    node.hidden = true;
  }, TOAST_MS);
}

export async function copyText(text, what = text) {
  try {
    await navigator.clipboard.writeText(text);
    toast(`Copied ${what}`);
  } catch {
    toast(`Copy this: ${text}`);
  }
}

/** Save an object URL (an image, a ZIP) under `filename` through a temporary link. */
export function saveUrl(url, filename) {
  const link = h("a", { href: url, download: filename, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
}

export function confirmAction(title, message, confirmLabel = "Confirm") {
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
export class BlobUrls {
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

export const blobs = new BlobUrls();
