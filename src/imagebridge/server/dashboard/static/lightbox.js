// The lightbox: one image at full size over the page, ←/→ (or a swipe) through the gallery
// (older pages load as it reaches them), a counter, zoom and pan, and beside it the prompt and every
// parameter asked against delivered, with what to do next: copy, download, open the job,
// edit this, vary, reuse the settings, compare, favourite, delete.
//
// The tile's thumbnail shows at once; the full image (possibly megabytes) replaces it when
// it has arrived. Full images are kept for the image on show and its neighbours only.

import { editThis, reuseSettings, vary } from "./actions.js";
import { api } from "./bridge.js";
import { formatBytes } from "./bytes.js";
import { openCompare } from "./compare.js";
import { gallery } from "./gallery.js";
import { grid } from "./grid.js";
import { deleteImages, toggleFavorite } from "./job_actions.js";
import { askedDelivered, copyableSettings, normalizationTable, showValue, warningList } from "./job_facts.js";
import { jobDialog } from "./job_dialog.js";
import { $, copyText, describeError, formatTime, h, iconButton, saveUrl, toast } from "./ui.js";
import { ZoomPan } from "./zoom.js";

const KEEP_NEAR = 1;

class Lightbox {
  constructor() {
    this.key = null;
    this.full = new Map();
    this.zoom = null;
    this.token = 0;
    this.removing = false;
  }

  get dialog() {
    return $("lightbox");
  }

  images() {
    return gallery.images();
  }

  index() {
    return this.images().findIndex((item) => item.key === this.key);
  }

  /** Open on the gallery entry `key` (an image). */
  open(key) {
    this.key = key;
    if (!this.dialog.open) this.dialog.showModal();
    $("lb-stage").focus();
    this.show();
  }

  /** Open on an image known by its artifact id (from the run under the composer). */
  async openImage(artifactId) {
    let entry = gallery.entry(`img:${artifactId}`);
    if (!entry) {
      await gallery.refresh();
      entry = gallery.entry(`img:${artifactId}`);
    }
    if (entry) this.open(entry.key);
    else toast("This image is not in the gallery's current view.");
  }

  close() {
    this.key = null;
    for (const { url } of this.full.values()) if (url) URL.revokeObjectURL(url);
    this.full.clear();
    $("lb-image").removeAttribute("src");
  }

  async step(delta) {
    let images = this.images();
    let index = this.index();
    if (index < 0) return;
    if (delta > 0 && index + delta >= images.length && gallery.cursor) {
      await gallery.loadMore();
      images = this.images();
      index = images.findIndex((item) => item.key === this.key);
    }
    const next = index + delta;
    if (next < 0 || next >= images.length) return;
    this.key = images[next].key;
    this.show();
  }

  fullUrl(entry) {
    const id = entry.image.id;
    let found = this.full.get(id);
    if (!found) {
      found = { url: null, promise: api.artifact(id).then((blob) => (found.url = URL.createObjectURL(blob))) };
      found.promise.catch(() => this.full.delete(id));
      this.full.set(id, found);
    }
    return found.promise;
  }

  /** Keep only the full images of the entry on show and its neighbours. */
  trim(images, index) {
    const near = new Set(images.slice(Math.max(0, index - KEEP_NEAR), index + KEEP_NEAR + 1).map((item) => item.image.id));
    for (const [id, found] of this.full) {
      if (near.has(id)) continue;
      if (found.url) URL.revokeObjectURL(found.url);
      this.full.delete(id);
    }
  }

  async show() {
    const token = (this.token += 1);
    const images = this.images();
    const index = this.index();
    const entry = images[index];
    if (!entry) {
      this.dialog.close();
      return;
    }
    const job = gallery.jobs.get(entry.job);
    $("lb-counter").textContent = `${index + 1} / ${images.length}${gallery.cursor ? "+" : ""}`;
    $("lb-prev").disabled = index === 0;
    $("lb-next").disabled = index === images.length - 1 && !gallery.cursor;
    $("lightbox-title").textContent = job && job.images > 1 ? `Image ${entry.position + 1} of ${job.images}` : "Image";
    const image = $("lb-image");
    const alt = `${job ? job.prompt.slice(0, 200) : "image"}`;
    image.alt = alt;
    $("lb-stage").setAttribute("aria-label", `Image ${index + 1}: ${alt}`);
    $("lb-message").hidden = true;
    const thumb = grid.thumbUrl(entry.key);
    if (thumb) image.src = thumb;
    else image.removeAttribute("src");
    this.zoom.reset();
    this.trim(images, index);
    this.renderInfo(entry, job, null);
    try {
      const url = await this.fullUrl(entry);
      if (token === this.token) image.src = url;
    } catch (error) {
      if (token !== this.token) return;
      $("lb-message").textContent = `The full image could not be loaded: ${describeError(error)}`;
      $("lb-message").hidden = false;
    }
    const neighbour = images[index + 1];
    if (neighbour && token === this.token) this.fullUrl(neighbour).catch(() => {});
    try {
      const full = await gallery.fullJob(entry.job);
      if (token === this.token) this.renderInfo(entry, job, full);
    } catch {
      // the panel keeps what the gallery knows
    }
  }

  renderInfo(entry, job, full) {
    const panel = $("lb-info");
    const row = job || { prompt: "", status: "succeeded", created: 0 };
    const image = entry.image;
    const data = full && full.result ? full.result.data.find((item) => item.id === image.id) : null;
    const parts = [
      h("section", { class: "info-prompt" },
        h("h3", { text: "Prompt" }),
        h("p", { class: "prose", text: row.prompt || "(no prompt)" }),
        h("div", { class: "button-row" },
          iconButton("copy", "Copy prompt", () => copyText(row.prompt, "the prompt"), { className: "small" }),
          iconButton("copy", "Copy parameters", async () => copyText(JSON.stringify(copyableSettings(full || (await gallery.fullJob(entry.job))), null, 2), "the parameters"), { className: "small" }),
        ),
      ),
      h("p", { class: "muted info-meta", text: [formatTime(row.created), `${image.width}×${image.height}`, image.format.toUpperCase(), formatBytes(image.bytes)].join(" · ") }),
      h("div", { class: "button-row actions" },
        // These continue in the composer: the lightbox closes first, so focus can go there.
        iconButton("edit", "Edit this", () => {
          this.dialog.close();
          editThis(image);
        }, { className: "small primary-soft" }),
        iconButton("vary", "Vary", () => {
          this.dialog.close();
          vary(entry.job);
        }, { className: "small" }),
        iconButton("reuse", "Reuse settings", () => {
          this.dialog.close();
          reuseSettings(entry.job);
        }, { className: "small" }),
        iconButton("compare", "Compare", () => this.compare(entry, full), { className: "small" }),
        iconButton("download", "Download", () => this.download(entry), { className: "small" }),
        iconButton("job", "Open job", () => jobDialog.open(entry.job), { className: "small" }),
        iconButton("star", "Favorite", () => toggleFavorite(entry.job), { className: "small favorite", "aria-pressed": row.favorite ? "true" : "false" }),
        iconButton("trash", "Delete image", () => this.remove(entry), { className: "small danger" }),
      ),
    ];
    if (full) {
      parts.push(h("section", {}, askedDelivered(full, data)));
      const result = full.result;
      if (result && result.revised_prompt) parts.push(h("section", {}, h("h3", { text: "Revised prompt" }), h("p", { class: "prose", text: result.revised_prompt })));
      if (result && result.normalizations && result.normalizations.length) parts.push(h("section", {}, h("h3", { text: "Normalizations" }), normalizationTable(result)));
      if (result && result.warnings && result.warnings.length) parts.push(h("section", {}, h("h3", { text: "Warnings" }), warningList(result)));
      if (full.request && full.request.negative_prompt) parts.push(h("section", {}, h("h3", { text: "Negative prompt" }), h("p", { class: "prose", text: full.request.negative_prompt })));
      if (result && result.effective) {
        const effective = result.effective;
        parts.push(h("details", { class: "all-parameters" }, h("summary", { text: "Every parameter" }), h("dl", { class: "facts" }, Object.entries(effective).map(([key, value]) => [h("dt", { text: key }), h("dd", { text: showValue(value) })]))));
      }
    } else {
      parts.push(h("p", { class: "muted", text: "Loading the request…" }));
    }
    panel.replaceChildren(...parts);
  }

  async download(entry) {
    try {
      saveUrl(await this.fullUrl(entry), String(entry.image.name).split("/").pop());
    } catch (error) {
      toast(`The image could not be downloaded: ${describeError(error)}`);
    }
  }

  compare(entry, full) {
    const here = { label: `This image (${entry.position + 1})`, load: () => this.fullUrl(entry) };
    const siblings = gallery.entriesOf(entry.job).filter((item) => item.image && item.key !== entry.key);
    const source = full && full.request.operation === "edit" && full.request.images && full.request.images[0];
    if (source && source.data_url) {
      openCompare({ label: "Source", load: async () => source.data_url }, here);
    } else if (siblings.length) {
      const other = siblings.find((item) => item.position > entry.position) || siblings[0];
      openCompare(here, { label: `Variant ${other.position + 1}`, load: () => this.fullUrl(other) });
    } else {
      toast("This request has no other image to compare with; select two images in the gallery.");
    }
  }

  async remove(entry) {
    const images = this.images();
    const index = images.findIndex((item) => item.key === entry.key);
    const after = images[index + 1] || images[index - 1] || null;
    this.removing = true;
    let deleted;
    try {
      deleted = await deleteImages([entry.image.id]);
    } finally {
      this.removing = false;
    }
    if (!deleted) return;
    if (after) {
      this.key = after.key;
      this.show();
    } else {
      this.dialog.close();
    }
  }

  onKey(event) {
    if (event.target.matches("input, textarea, select")) return;
    if (event.key === "ArrowLeft") this.step(-1);
    else if (event.key === "ArrowRight") this.step(1);
    else if (!this.zoom.key(event)) return;
    event.preventDefault();
  }
}

export const lightbox = new Lightbox();

export function wireLightbox() {
  lightbox.zoom = new ZoomPan([$("lb-stage")]);
  lightbox.zoom.addEventListener("change", () => {
    $("lb-zoom").textContent = lightbox.zoom.label();
  });
  // A swipe leftwards brings the next image, as on a phone's photo viewer.
  lightbox.zoom.addEventListener("swipe", (event) => lightbox.step(-event.detail));
  $("lb-prev").addEventListener("click", () => lightbox.step(-1));
  $("lb-next").addEventListener("click", () => lightbox.step(1));
  $("lb-zoom-in").addEventListener("click", () => lightbox.zoom.zoomBy(1.25));
  $("lb-zoom-out").addEventListener("click", () => lightbox.zoom.zoomBy(0.8));
  $("lb-fit").addEventListener("click", () => lightbox.zoom.reset());
  $("lb-info-toggle").addEventListener("click", (event) => {
    const shown = event.currentTarget.getAttribute("aria-expanded") === "true";
    event.currentTarget.setAttribute("aria-expanded", shown ? "false" : "true");
    $("lb-info").hidden = shown;
  });
  $("lightbox").addEventListener("keydown", (event) => lightbox.onKey(event));
  $("lightbox").addEventListener("close", () => lightbox.close());
  gallery.addEventListener("change", () => {
    if (!lightbox.key || !$("lightbox").open || lightbox.removing) return;
    const entry = gallery.entry(lightbox.key);
    if (!entry) {
      lightbox.dialog.close();
      return;
    }
    const job = gallery.jobs.get(entry.job);
    const favorite = $("lb-info").querySelector("button.favorite");
    if (job && favorite) favorite.setAttribute("aria-pressed", job.favorite ? "true" : "false");
  });
}
