// The gallery grid: one tile per entry, thumbnails fetched only near the screen, the next
// page fetched as the end comes near, selection (click, shift-range) and arrow-key focus.
//
// Thumbnails are authenticated blobs: a tile asks for its thumbnail when it comes within
// LOAD_MARGIN of the screen and has stayed there DWELL_MS (so a fast scroll past a thousand
// tiles fetches none of them), at most THUMB_CONCURRENCY at a time, and gives its object URL
// back when it is RELEASE_MARGIN away (a fetch already under way finishes and is dropped:
// aborting it would save little and show as a failed request). Tiles on the screen are
// fetched before those in the margin. What a click opens is the page's (connect()).

import { api } from "./bridge.js";
import { ACTIVE, gallery } from "./gallery.js";
import { selection } from "./selection.js";
import { $, h, icon, plural } from "./ui.js";

const LOAD_PX = 400;
const RELEASE_PX = 3000;
const LOAD_MARGIN = `${LOAD_PX}px 0px`;
const RELEASE_MARGIN = `${RELEASE_PX}px 0px`;
const SWEEP_MS = 200;
const MORE_MARGIN_PX = 800;
const MORE_MARGIN = `${MORE_MARGIN_PX}px 0px`;
const DWELL_MS = 90;
const SCROLL_QUIET_MS = 150;
const THUMB_CONCURRENCY = 8;
const PROMPT_LABEL_CHARS = 90;
const FIRST_SCREEN_WAIT_MS = 1500;

function short(text, limit = PROMPT_LABEL_CHARS) {
  const flat = String(text || "").replace(/\s+/g, " ").trim();
  return flat.length > limit ? `${flat.slice(0, limit - 1)}…` : flat;
}

/** How far `node` is from the screen, vertically (0 when on it). */
function distance(node) {
  const box = node.getBoundingClientRect();
  if (box.bottom < 0) return -box.bottom;
  if (box.top > window.innerHeight) return box.top - window.innerHeight;
  return 0;
}

function stage(job) {
  if (job.cancel_requested && ACTIVE.has(job.status)) return "cancellation requested";
  if (job.status === "queued") return "waiting for a worker";
  const progress = job.progress;
  let text = progress ? progress.stage.replace(/_/g, " ") : job.status;
  if (progress && progress.partial_images) text += ` · ${plural(progress.partial_images, "preview")}`;
  return text;
}

/** Give an object URL's bytes back. An image still reading the URL would fail that read
 *  if the URL went first (a tile scrolled far away while its thumbnail was arriving): it
 *  finishes, hidden, and then lets go. */
function letGo(image, url) {
  const done = () => {
    image.removeEventListener("load", done);
    image.removeEventListener("error", done);
    if (image.getAttribute("src") === url) image.removeAttribute("src");
    URL.revokeObjectURL(url);
  };
  if (image.complete || image.getAttribute("src") !== url) {
    done();
    return;
  }
  image.addEventListener("load", done);
  image.addEventListener("error", done);
}

class Grid {
  constructor() {
    this.tiles = new Map();
    this.focusKey = null;
    this.edge = 0;
    this.queue = [];
    this.urgent = [];
    this.running = 0;
    this.thumbRequests = 0;
    this.handlers = { open: () => {}, openJob: () => {}, cancel: () => {} };
    this.near = null;
    this.far = null;
    this.scrolled = 0;
    this.urgentRunning = 0;
    this.settled = [];
  }

  /** Resolves once the thumbnails of the tiles on the screen have arrived (or failed), or
   *  after FIRST_SCREEN_WAIT_MS: app.js loads the other views after that. */
  firstScreen() {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, FIRST_SCREEN_WAIT_MS);
      this.settled.push(() => {
        clearTimeout(timer);
        resolve();
      });
      this.checkSettled();
    });
  }

  checkSettled() {
    if (this.urgent.length || this.urgentRunning) return;
    for (const resolve of this.settled.splice(0)) resolve();
  }

  /** What a click on a tile does: open(key) for an image, openJob(id) otherwise. */
  connect(handlers) {
    Object.assign(this.handlers, handlers);
  }

  get list() {
    return $("gallery-grid");
  }

  start() {
    this.near = new IntersectionObserver((records) => this.onNear(records), { rootMargin: LOAD_MARGIN });
    this.far = new IntersectionObserver((records) => this.onFar(records), { rootMargin: RELEASE_MARGIN });
    const more = new IntersectionObserver((records) => {
      if (records.some((record) => record.isIntersecting)) this.loadMoreWhileVisible();
    }, { rootMargin: MORE_MARGIN });
    more.observe($("gallery-sentinel"));
    let sweep = null;
    window.addEventListener("scroll", () => {
      this.scrolled = performance.now();
      clearTimeout(sweep);
      sweep = setTimeout(() => this.startVisible(), SWEEP_MS);
    }, { passive: true });
    gallery.addEventListener("change", () => this.render());
    selection.addEventListener("change", () => this.renderSelection());
    this.list.addEventListener("keydown", (event) => this.onKey(event));
    $("load-more").addEventListener("click", () => gallery.loadMore());
  }

  /** Keep loading pages while the end of the grid is near the screen. */
  async loadMoreWhileVisible() {
    const near = () => $("gallery-sentinel").getBoundingClientRect().top < window.innerHeight + MORE_MARGIN_PX;
    while (gallery.cursor && near()) {
      const before = gallery.entries.length;
      await gallery.loadMore();
      if (gallery.entries.length === before) return;
      await new Promise((resolve) => requestAnimationFrame(resolve));
    }
  }

  // -- rendering --------------------------------------------------------------------------
  render() {
    const entries = gallery.entries;
    const shown = new Set(entries.map((item) => item.key));
    for (const [key, tile] of this.tiles) {
      if (shown.has(key)) continue;
      this.dropTile(tile);
      this.tiles.delete(key);
    }
    selection.keep(shown);
    const list = this.list;
    entries.forEach((entry, index) => {
      let tile = this.tiles.get(entry.key);
      if (!tile) {
        tile = this.createTile(entry);
        this.tiles.set(entry.key, tile);
      }
      this.updateTile(tile, entry);
      if (list.children[index] !== tile.node) list.insertBefore(tile.node, list.children[index] || null);
    });
    if (!this.focusKey || !this.tiles.has(this.focusKey)) this.focusKey = entries.length ? entries[0].key : null;
    for (const [key, tile] of this.tiles) tile.open.tabIndex = key === this.focusKey ? 0 : -1;
    $("load-more").hidden = !gallery.cursor;
    $("gallery-status").textContent = gallery.status();
    const filtered = Object.values(gallery.filters()).some(Boolean);
    $("gallery-empty").hidden = entries.length > 0 || !gallery.loaded || Boolean(gallery.lastError) || filtered;
    this.renderSelection();
    this.startVisible();
  }

  /** Ask at once for the thumbnails of the tiles on the screen: after a render, without
   *  waiting a frame for the observers, and when a scroll stops, in case a record arrived
   *  too late to matter. */
  startVisible() {
    const nodes = this.list.children;
    let low = 0;
    let high = nodes.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (nodes[middle].getBoundingClientRect().bottom <= 0) low = middle + 1;
      else high = middle;
    }
    for (let index = low; index < nodes.length; index += 1) {
      const box = nodes[index].getBoundingClientRect();
      if (box.top >= window.innerHeight) break;
      const tile = this.tiles.get(nodes[index].dataset.key);
      if (box.bottom <= 0 || !tile || !tile.entry || !tile.entry.image || tile.state !== "idle") continue;
      clearTimeout(tile.timer);
      tile.state = "queued";
      this.urgent.push(tile);
    }
    this.pump();
  }

  createTile(entry) {
    const image = h("img", { class: "tile-image", alt: "", hidden: true, decoding: "async", draggable: "false" });
    const placeholder = h("span", { class: "tile-placeholder" });
    const open = h("button", { type: "button", class: "tile-open" }, image, placeholder);
    const check = h("input", { type: "checkbox", tabindex: "-1" });
    const checkText = h("span", { class: "visually-hidden" });
    const checkLabel = h("label", { class: "tile-check" }, check, checkText);
    const count = h("span", { class: "tile-count" });
    const favorite = h("span", { class: "tile-fav", title: "Favorite" }, icon("star"));
    const prompt = h("p", { class: "tile-prompt" });
    const meta = h("p", { class: "tile-meta" });
    const cancel = h("button", { type: "button", class: "small danger tile-cancel", text: "Cancel", hidden: true });
    const node = h("li", { class: "tile", dataset: { key: entry.key, job: entry.job } }, open, checkLabel, count, favorite, h("div", { class: "tile-caption" }, prompt, meta, cancel));
    const tile = { key: entry.key, node, open, image, placeholder, check, checkText, count, favorite, prompt, meta, cancel, url: null, state: "idle", timer: null, preview: null };
    open.addEventListener("click", (event) => this.onTileClick(tile, event));
    open.addEventListener("focus", () => {
      this.focusKey = tile.key;
    });
    check.addEventListener("click", (event) => {
      event.preventDefault();
      if (event.shiftKey) selection.extend(tile.key, this.order());
      else selection.toggle(tile.key);
    });
    cancel.addEventListener("click", () => this.handlers.cancel(gallery.entry(tile.key)?.job));
    node.addEventListener("dblclick", (event) => event.preventDefault());
    return tile;
  }

  updateTile(tile, entry) {
    const job = gallery.jobs.get(entry.job) || { status: "succeeded", prompt: "", requested: 1, images: 1 };
    tile.entry = entry;
    const node = tile.node;
    node.dataset.status = job.status;
    node.dataset.kind = entry.image ? "image" : "row";
    const group = job.images > 1 && entry.image;
    tile.count.hidden = !group;
    tile.count.textContent = group ? `${entry.position + 1}/${job.images}` : "";
    tile.count.title = group ? `${plural(job.images, "image")} from this request` : "";
    node.classList.toggle("grouped", Boolean(group));
    node.classList.toggle("group-start", Boolean(group) && entry.position === 0);
    tile.favorite.hidden = !job.favorite;
    tile.prompt.textContent = short(job.prompt, 160) || "(no prompt)";
    tile.prompt.title = job.prompt;
    const what = entry.image ? `Image ${entry.position + 1} of ${job.images}` : `${job.status[0].toUpperCase()}${job.status.slice(1)} request`;
    tile.open.setAttribute("aria-label", `${what}: ${short(job.prompt) || "no prompt"}`);
    tile.checkText.textContent = `Select ${what.toLowerCase()}: ${short(job.prompt, 40)}`;
    tile.cancel.hidden = !ACTIVE.has(job.status);
    tile.cancel.disabled = Boolean(job.cancel_requested);
    if (entry.image) {
      tile.meta.textContent = [job.provider, `${entry.image.width}×${entry.image.height}`, entry.image.format.toUpperCase()].filter(Boolean).join(" · ");
      this.watch(tile);
      return;
    }
    tile.meta.textContent = job.error ? `${job.error.code}: ${job.error.message}` : stage(job);
    tile.meta.classList.toggle("error-text", Boolean(job.error));
    this.showRow(tile, job);
  }

  /** A row without an image: its live preview while it runs, else what happened. */
  showRow(tile, job) {
    tile.placeholder.hidden = false;
    if (ACTIVE.has(job.status)) {
      tile.placeholder.textContent = job.status === "queued" ? "Queued" : "Working…";
      tile.placeholder.classList.add("working");
      const count = job.progress ? job.progress.partial_images : 0;
      if (count > 0 && tile.preview !== count) this.loadPreview(tile, job.id, count);
      return;
    }
    tile.placeholder.classList.remove("working");
    tile.placeholder.textContent = { failed: "Failed", cancelled: "Cancelled", interrupted: "Interrupted" }[job.status] || "No image";
    if (tile.url) this.releaseThumb(tile);
  }

  async loadPreview(tile, jobId, count) {
    tile.preview = count;
    let found;
    try {
      found = await api.partialPreview(jobId);
    } catch {
      found = null;
    }
    if (!found || tile.preview !== count || !this.tiles.has(tile.key)) return;
    this.setImage(tile, URL.createObjectURL(found.blob), "Partial preview");
    tile.node.classList.add("previewing");
  }

  setImage(tile, url, alt) {
    if (tile.url) URL.revokeObjectURL(tile.url);
    tile.url = url;
    tile.image.src = url;
    tile.image.alt = alt;
    tile.image.hidden = false;
    tile.placeholder.hidden = true;
  }

  dropTile(tile) {
    this.near.unobserve(tile.node);
    this.far.unobserve(tile.node);
    this.releaseThumb(tile);
    tile.node.remove();
  }

  // -- lazy thumbnails --------------------------------------------------------------------
  watch(tile) {
    if (tile.watched) return;
    tile.watched = true;
    tile.placeholder.hidden = Boolean(tile.url);
    tile.placeholder.classList.remove("working");
    if (!tile.url) tile.placeholder.textContent = "";
    this.near.observe(tile.node);
    this.far.observe(tile.node);
  }

  thumbEdge() {
    if (!this.edge) {
      const width = this.list.firstElementChild ? this.list.firstElementChild.getBoundingClientRect().width : 200;
      this.edge = Math.min(1024, Math.max(128, Math.ceil((width * (window.devicePixelRatio || 1)) / 64) * 64));
    }
    return this.edge;
  }

  // Observer records arrive a little after they were taken; each tile's distance is measured
  // again when its record is handled, so a late record never undoes what is true now.
  onNear(records) {
    for (const record of records) {
      const tile = this.tiles.get(record.target.dataset.key);
      if (!tile || !tile.entry || !tile.entry.image) continue;
      clearTimeout(tile.timer);
      if (distance(tile.node) > LOAD_PX) {
        if (tile.state === "queued") tile.state = "idle";
        continue;
      }
      if (tile.state !== "idle") continue;
      const onScreen = distance(tile.node) === 0;
      const enqueue = () => {
        tile.state = "queued";
        (onScreen ? this.urgent : this.queue).push(tile);
        this.pump();
      };
      // A tile must stay near the screen a moment before it costs a request, unless it is on
      // the screen of a page at rest (the first screen, after a jump).
      if (onScreen && performance.now() - this.scrolled >= SCROLL_QUIET_MS) enqueue();
      else tile.timer = setTimeout(enqueue, DWELL_MS);
    }
  }

  onFar(records) {
    for (const record of records) {
      const tile = this.tiles.get(record.target.dataset.key);
      if (tile && tile.entry && tile.entry.image && distance(tile.node) > RELEASE_PX) this.releaseThumb(tile);
    }
  }

  pump() {
    while (this.running < THUMB_CONCURRENCY && (this.urgent.length || this.queue.length)) {
      const urgent = this.urgent.length > 0;
      const tile = urgent ? this.urgent.shift() : this.queue.shift();
      if (tile.state !== "queued" || !this.tiles.has(tile.key)) continue;
      this.fetchThumb(tile, urgent);
    }
    this.checkSettled();
  }

  async fetchThumb(tile, urgent = false) {
    tile.state = "loading";
    this.running += 1;
    if (urgent) this.urgentRunning += 1;
    this.thumbRequests += 1;
    const image = tile.entry.image;
    try {
      const blob = await api.thumbnail(image.id, this.thumbEdge(), { allowMissing: true });
      if (tile.state !== "loading") return;
      if (!blob) {
        tile.state = "missing";
        tile.node.dataset.removed = "1";
        tile.placeholder.textContent = "No longer stored";
        tile.placeholder.hidden = false;
        return;
      }
      this.setImage(tile, URL.createObjectURL(blob), tile.open.getAttribute("aria-label"));
      tile.node.classList.remove("previewing");
      tile.state = "loaded";
    } catch {
      if (tile.state === "loading") {
        tile.state = "idle";
        tile.placeholder.textContent = "Image unavailable";
      }
    } finally {
      this.running -= 1;
      if (urgent) this.urgentRunning -= 1;
      this.pump();
    }
  }

  releaseThumb(tile) {
    clearTimeout(tile.timer);
    if (tile.url) letGo(tile.image, tile.url);
    else tile.image.removeAttribute("src");
    tile.url = null;
    tile.preview = null;
    tile.image.hidden = true;
    tile.placeholder.hidden = false;
    if (tile.state !== "missing") tile.state = "idle";
  }

  /** The object URL a tile shows (a thumbnail), for views that open on top of it. */
  thumbUrl(key) {
    const tile = this.tiles.get(key);
    return tile && tile.state === "loaded" ? tile.url : null;
  }

  // -- selection and keyboard ---------------------------------------------------------------
  order() {
    return gallery.entries.map((item) => item.key);
  }

  onTileClick(tile, event) {
    const entry = gallery.entry(tile.key);
    if (!entry) return;
    if (event.shiftKey) {
      selection.extend(tile.key, this.order());
      return;
    }
    if (selection.size || event.ctrlKey || event.metaKey) {
      selection.toggle(tile.key);
      return;
    }
    if (entry.image) this.handlers.open(entry.key);
    else this.handlers.openJob(entry.job);
  }

  renderSelection() {
    for (const [key, tile] of this.tiles) {
      const selected = selection.has(key);
      tile.check.checked = selected;
      tile.node.classList.toggle("selected", selected);
    }
    this.list.classList.toggle("selecting", selection.size > 0);
  }

  columns() {
    const tiles = [...this.list.children];
    if (!tiles.length) return 1;
    const top = tiles[0].offsetTop;
    const count = tiles.findIndex((node) => node.offsetTop !== top);
    return count < 0 ? tiles.length : count;
  }

  onKey(event) {
    const tile = event.target.closest(".tile");
    if (!tile || event.target.classList.contains("tile-cancel")) return;
    const keys = this.order();
    const index = keys.indexOf(tile.dataset.key);
    const moves = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -this.columns(), ArrowDown: this.columns(), Home: -index, End: keys.length - 1 - index };
    if (event.key in moves) {
      event.preventDefault();
      const next = Math.max(0, Math.min(keys.length - 1, index + moves[event.key]));
      this.focus(keys[next]);
      if (event.shiftKey) selection.extend(keys[next], keys);
      return;
    }
    if (event.key === " ") {
      event.preventDefault();
      selection.toggle(tile.dataset.key);
    } else if (event.key === "Escape" && selection.size) {
      event.preventDefault();
      selection.clear();
    }
  }

  /** Move the keyboard focus (and the one tabbable tile) to `key`. */
  focus(key) {
    const tile = this.tiles.get(key);
    if (!tile) return;
    const previous = this.tiles.get(this.focusKey);
    if (previous) previous.open.tabIndex = -1;
    this.focusKey = key;
    tile.open.tabIndex = 0;
    tile.open.focus();
    tile.node.scrollIntoView({ block: "nearest" });
  }
}

export const grid = new Grid();
