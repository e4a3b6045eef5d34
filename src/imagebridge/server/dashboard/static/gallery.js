// The gallery's data: pages of GET /v1/gallery (the history as images, newest first), the
// filters, polling while work runs, and the full jobs the lightbox and the job dialog read.
//
// Entries are in the bridge's order: rows newest first, a row's images in output order, a row
// without an image as one entry. Rendering is grid.js; it listens to "change" events.

import { ApiError } from "./api.js";
import { api } from "./bridge.js";
import { utf8Length } from "./bytes.js";
import * as store from "./store.js";
import { $, describeError, plural } from "./ui.js";

const PAGE_SIZE = 60;
/** The first page is smaller: it is what the first screen waits for (boot.js asks for it). */
export const FIRST_PAGE_SIZE = 32;
/** The bridge's bound on a history search (storage/rules/history.py). */
export const SEARCH_MAX_BYTES = 512;
const POLL_ACTIVE_MS = 2500;
const POLL_IDLE_MS = 15000;
const POLL_HIDDEN_MS = 5000;
const POLL_VISIBLE_MS = 250;
const SEARCH_DEBOUNCE_MS = 300;
/** Job states that can still change. */
export const ACTIVE = new Set(["queued", "running"]);

/** What says a row changed: the second it was updated is not enough (a cancellation and
 *  the end it causes can fall in the same second). */
function version(job) {
  return `${job.updated}/${job.status}/${job.favorite}/${job.deleted || 0}/${Boolean(job.cancel_requested)}`;
}

function entryKey(item) {
  return item.image ? `img:${item.image.id}` : `job:${item.job}`;
}

class Gallery extends EventTarget {
  constructor() {
    super();
    this.entries = [];
    this.jobs = new Map();
    this.full = new Map();
    this.removed = new Set();
    this.cursor = null;
    this.olderLoaded = false;
    this.loadingMore = null;
    this.generation = 0;
    this.timer = null;
    this.refreshing = null;
    this.pending = false;
    this.lastError = "";
    this.loaded = false;
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

  changed() {
    this.dispatchEvent(new Event("change"));
  }

  /** The entry whose key is `key`, or null. */
  entry(key) {
    return this.entries.find((item) => item.key === key) || null;
  }

  /** The entries that show an image, in order (what the lightbox steps through). */
  images() {
    return this.entries.filter((item) => item.image);
  }

  /** The entries of one row, in order. */
  entriesOf(jobId) {
    return this.entries.filter((item) => item.job === jobId);
  }

  anyActive() {
    for (const item of this.entries) {
      const job = this.jobs.get(item.job);
      if (job && ACTIVE.has(job.status)) return true;
    }
    return false;
  }

  /** a before b in the bridge's order: newest row first, then output order. */
  compare(a, b) {
    const ja = this.jobs.get(a.job);
    const jb = this.jobs.get(b.job);
    if (ja && jb && ja.created !== jb.created) return jb.created - ja.created;
    if (a.job !== b.job) return a.job < b.job ? 1 : -1;
    return a.position - b.position;
  }

  /** Start over with the current filters (after a filter change). */
  reset() {
    this.generation += 1;
    this.entries = [];
    this.cursor = null;
    this.olderLoaded = false;
    this.loaded = false;
    this.changed();
    return this.refresh();
  }

  /** Reload the first page; a call during a reload runs one more reload after it. */
  refresh() {
    if (this.refreshing) {
      this.pending = true;
      return this.refreshing;
    }
    $("gallery-grid").setAttribute("aria-busy", "true");
    this.refreshing = (async () => {
      do {
        this.pending = false;
        await this._refresh();
      } while (this.pending);
    })().finally(() => {
      this.refreshing = null;
      $("gallery-grid").setAttribute("aria-busy", "false");
      this.schedule();
    });
    return this.refreshing;
  }

  _accept(page) {
    for (const job of page.jobs || []) {
      const cached = this.full.get(job.id);
      if (cached && cached.version !== version(job)) this.full.delete(job.id);
      this.jobs.set(job.id, job);
    }
    return (page.items || []).filter((item) => !(item.image && this.removed.has(item.image.id))).map((item) => ({ ...item, key: entryKey(item) }));
  }

  async _refresh() {
    const generation = this.generation;
    const filters = this.filters();
    if (filters.search && utf8Length(filters.search) > SEARCH_MAX_BYTES) {
      $("gallery-status").textContent = `Searches are limited to ${SEARCH_MAX_BYTES} bytes.`;
      return;
    }
    let page;
    try {
      page = (await this.prefetched(filters)) || (await api.gallery({ ...filters, limit: FIRST_PAGE_SIZE }));
    } catch (error) {
      if (generation === this.generation) this.showError(error);
      return;
    }
    if (generation !== this.generation) return;
    const fresh = this._accept(page);
    if (!page.next_cursor || !this.olderLoaded || !fresh.length) {
      this.entries = fresh;
      this.cursor = page.next_cursor || null;
      this.olderLoaded = false;
    } else {
      const last = fresh[fresh.length - 1];
      const keys = new Set(fresh.map((item) => item.key));
      const older = this.entries.filter((item) => !keys.has(item.key) && this.compare(item, last) > 0);
      this.entries = [...fresh, ...older];
    }
    this.forgetUnused();
    this.lastError = "";
    this.loaded = true;
    this.changed();
  }

  /** The first page boot.js asked for while the modules loaded, when it answers the query
   *  wanted now (the default filters, mine); used once. */
  async prefetched(filters) {
    const early = window.imagebridgeFirstGallery;
    window.imagebridgeFirstGallery = null;
    const plain = !filters.status && !filters.favorite && !filters.hidden && !filters.search && !api.viewKey;
    if (!early || !plain) return null;
    const response = await early;
    return response ? api.adopt(response) : null;
  }

  /** The next page after what is shown; one at a time. */
  loadMore() {
    if (!this.cursor) return Promise.resolve();
    if (!this.loadingMore) {
      this.loadingMore = this._loadMore().finally(() => {
        this.loadingMore = null;
      });
    }
    return this.loadingMore;
  }

  async _loadMore() {
    const generation = this.generation;
    try {
      const page = await api.gallery({ ...this.filters(), limit: PAGE_SIZE, cursor: this.cursor });
      if (generation !== this.generation) return;
      const known = new Set(this.entries.map((item) => item.key));
      this.entries.push(...this._accept(page).filter((item) => !known.has(item.key)));
      this.cursor = page.next_cursor || null;
      this.olderLoaded = true;
      this.changed();
    } catch (error) {
      if (generation === this.generation) this.showError(error);
    }
  }

  forgetUnused() {
    const used = new Set(this.entries.map((item) => item.job));
    for (const id of this.jobs.keys()) if (!used.has(id)) this.jobs.delete(id);
  }

  /** Images deleted from the bridge: the history still names them, the gallery does not. */
  forgetImages(ids) {
    for (const id of ids) this.removed.add(id);
    this.entries = this.entries.filter((item) => !(item.image && this.removed.has(item.image.id)));
    this.changed();
  }

  /** The full job (request, result, error), read once per change of the row. */
  fullJob(id) {
    const known = this.jobs.get(id);
    const cached = this.full.get(id);
    if (cached && (!known || cached.version === version(known))) return cached.promise;
    const promise = api.getJob(id);
    const entry = { version: known ? version(known) : null, promise };
    this.full.set(id, entry);
    promise.then((job) => {
      entry.version = version(job);
    }, () => this.full.delete(id));
    return promise;
  }

  /** A job the page changed (favourite, hidden, cancelled): its row shows it at once. */
  rememberJob(job) {
    this.full.set(job.id, { version: version(job), promise: Promise.resolve(job) });
    const known = this.jobs.get(job.id);
    if (!known) return;
    const row = { ...known, status: job.status, updated: job.updated, favorite: job.favorite, cancel_requested: Boolean(job.cancel_requested) };
    if (job.deleted) row.deleted = job.deleted;
    else delete row.deleted;
    this.jobs.set(job.id, row);
    this.changed();
  }

  status() {
    if (this.lastError) return this.lastError;
    if (!this.loaded) return "Loading…";
    const images = this.entries.filter((item) => item.image).length;
    const rows = new Set(this.entries.map((item) => item.job)).size;
    if (!this.entries.length) return Object.values(this.filters()).some(Boolean) ? "Nothing matches these filters yet." : "No images yet.";
    return `${plural(images, "image")} from ${plural(rows, "request")}${this.cursor ? "; scroll for older ones" : ""}.`;
  }

  showError(error) {
    this.lastError = error instanceof ApiError && error.status === 401 ? "Authentication is required to show the gallery." : `The gallery could not be loaded: ${describeError(error)}`;
    this.changed();
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
    if (store.get("paused")) {
      this.schedule(POLL_IDLE_MS);
      return;
    }
    this.refresh();
    this.dispatchEvent(new Event("poll"));
  }
}

export const gallery = new Gallery();

export function wireGallery() {
  let debounce = null;
  $("search").addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => gallery.reset(), SEARCH_DEBOUNCE_MS);
  });
  for (const id of ["status-filter", "favorites-filter", "hidden-filter"]) $(id).addEventListener("change", () => gallery.reset());
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) gallery.schedule(POLL_VISIBLE_MS);
    else gallery.schedule();
  });
}
