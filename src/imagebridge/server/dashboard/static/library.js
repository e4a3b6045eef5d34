// The library: the job cards, their filters and paging, polling while jobs are active,
// and the actions on a job (favorite, hide, cancel) that the cards and the dialog share.
//
// The job dialog is attached with connectDialog() so that this module does not import it.

import { ApiError } from "./api.js";
import { api } from "./bridge.js";
import { SEARCH_MAX_BYTES, utf8Length } from "./form.js";
import * as store from "./store.js";
import { $, blobs, confirmAction, describeError, formatTime, h, plural, toast } from "./ui.js";

const PAGE_SIZE = 24;
const POLL_ACTIVE_MS = 2500;
const POLL_IDLE_MS = 15000;
const POLL_HIDDEN_MS = 5000;
const POLL_VISIBLE_MS = 250;
const SEARCH_DEBOUNCE_MS = 300;
const CARD_THUMBNAIL_EDGE = 640;
const DETAIL_CONCURRENCY = 4;
/** Job states that can still change. */
export const ACTIVE = new Set(["queued", "running"]);

function sortJobs(a, b) {
  if (a.created !== b.created) return b.created - a.created;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

export function firstArtifact(job) {
  const data = job && job.result && Array.isArray(job.result.data) ? job.result.data : [];
  return data.find((item) => item.type === "artifact") || null;
}

class Library {
  constructor() {
    this.jobDialog = null;
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

  /** The job dialog the cards open and keep up to date (set once, by the page's entry). */
  connectDialog(dialog) {
    this.jobDialog = dialog;
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
    if (store.get("paused")) {
      this.schedule(POLL_IDLE_MS);
      return;
    }
    this.refresh();
    this.jobDialog.refreshIfActive();
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
      if (!shown.has(id) && id !== this.jobDialog.id) this.details.delete(id);
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
    const shownDetail = this.jobDialog.id ? this.details.get(this.jobDialog.id) : null;
    if (shownDetail && this.jobDialog.job && shownDetail !== this.jobDialog.job && (shownDetail.updated !== this.jobDialog.job.updated || shownDetail.status !== this.jobDialog.job.status)) this.jobDialog.update(shownDetail);
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
    const details = h("button", { type: "button", onclick: () => this.jobDialog.open(id), text: "Details" });
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
    let blob;
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
    this.jobDialog.showPreview(id, entry.url);
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

export const library = new Library();

export async function toggleFavorite(id) {
  const current = library.summaries.get(id) || library.details.get(id);
  if (!current) return;
  try {
    const job = await api.updateJob(id, { favorite: !current.favorite });
    library.remember(job);
    library.jobDialog.update(job);
    toast(job.favorite ? "Marked as favorite." : "Removed from favorites.");
    if ($("favorites-filter").checked && !job.favorite) await library.refresh();
  } catch (error) {
    toast(`The job could not be updated: ${describeError(error)}`);
  }
}

export async function toggleHidden(id) {
  const current = library.summaries.get(id) || library.details.get(id);
  if (!current) return;
  const hide = !current.deleted;
  try {
    const job = await api.updateJob(id, { deleted: hide });
    library.remember(job);
    library.jobDialog.update(job);
    toast(hide ? "Job hidden. Tick Hidden only to find it again." : "Job restored.");
    await library.refresh();
  } catch (error) {
    toast(`The job could not be updated: ${describeError(error)}`);
  }
}

export async function cancelJob(id) {
  const confirmed = await confirmAction(
    "Cancel job",
    "Cancellation is best effort: the provider may already have done (and charged for) the work, and a finished image can still arrive.",
    "Cancel job",
  );
  if (!confirmed) return;
  try {
    const job = await api.cancelJob(id);
    library.remember(job);
    library.jobDialog.update(job);
    toast(job.status === "cancelled" ? "Job cancelled." : "Cancellation requested.");
    await library.refresh();
  } catch (error) {
    toast(`The job could not be cancelled: ${describeError(error)}`);
  }
}

export function wireLibrary() {
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
