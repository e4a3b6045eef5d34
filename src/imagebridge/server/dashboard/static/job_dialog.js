// The job detail dialog: status, timings, parameters, attempts, images and actions of one
// job. It follows the job while it runs (its own poll, and whatever the gallery learns first).

import { api } from "./bridge.js";
import { formatBytes } from "./bytes.js";
import { ACTIVE, gallery } from "./gallery.js";
import { cancelJob, onJobChanged, toggleFavorite, toggleHidden } from "./job_actions.js";
import { errorPanel, normalizationTable, parameterTable, warningList } from "./job_facts.js";
import { $, blobs, copyText, definitionList, describeError, formatMs, formatTime, h, saveUrl, table, toast } from "./ui.js";

const DETAIL_PREVIEW_EDGE = 1024;

class JobDialog {
  constructor() {
    this.id = null;
    this.job = null;
    this.previewFigure = null;
    this.previewUrl = null;
    this.previews = 0;
    this.imageKeys = [];
  }

  get dialog() {
    return $("job-dialog");
  }

  async open(id) {
    this.id = id;
    this.job = null;
    this.previews = 0;
    $("job-dialog-title").textContent = "Job";
    $("job-dialog-actions").replaceChildren();
    $("job-dialog-body").replaceChildren(h("p", { class: "muted", text: "Loading…" }));
    if (!this.dialog.open) this.dialog.showModal();
    try {
      const job = await gallery.fullJob(id);
      if (this.id !== id) return;
      this.update(job);
    } catch {
      if (this.id === id) $("job-dialog-body").replaceChildren(h("p", { class: "error-text", text: "This job is no longer available." }));
    }
  }

  close() {
    this.id = null;
    this.job = null;
    this.previewFigure = null;
    if (this.previewUrl) URL.revokeObjectURL(this.previewUrl);
    this.previewUrl = null;
    for (const key of this.imageKeys) blobs.drop(key);
    this.imageKeys = [];
  }

  /** Read the job again while it can still change (the gallery's poll calls this). */
  async refreshIfActive() {
    if (!this.id || !this.dialog.open || !this.job || !ACTIVE.has(this.job.status)) return;
    const id = this.id;
    try {
      const job = await api.getJob(id);
      if (this.id === id) this.update(job);
    } catch {
      // the next poll tries again
    }
  }

  /** The gallery saw the row change (it ended while polls slowed down, say): follow it. */
  followGallery() {
    if (!this.id || !this.job || !this.dialog.open) return;
    const row = gallery.jobs.get(this.id);
    if (row && (row.updated !== this.job.updated || row.status !== this.job.status || row.favorite !== this.job.favorite)) {
      const id = this.id;
      gallery.fullJob(id).then((job) => this.id === id && this.update(job), () => {});
    }
  }

  update(job) {
    if (this.id !== job.id || !this.dialog.open) return;
    this.job = job;
    this.render();
    const count = job.progress ? job.progress.partial_images : 0;
    if (ACTIVE.has(job.status) && count > this.previews) {
      this.previews = count;
      this.loadPreview(job.id);
    }
  }

  async loadPreview(id) {
    let found;
    try {
      found = await api.partialPreview(id);
    } catch {
      found = null;
    }
    if (!found || this.id !== id) return;
    if (this.previewUrl) URL.revokeObjectURL(this.previewUrl);
    this.previewUrl = URL.createObjectURL(found.blob);
    this.showPreview();
  }

  showPreview() {
    if (!this.previewFigure || !this.previewUrl || !this.job || !ACTIVE.has(this.job.status)) return;
    this.previewFigure.querySelector("img").src = this.previewUrl;
    this.previewFigure.hidden = false;
  }

  renderActions(job) {
    const actions = [
      h("button", { type: "button", class: "favorite", onclick: () => toggleFavorite(job.id), "aria-pressed": job.favorite ? "true" : "false", title: job.favorite ? "Remove from favorites" : "Add to favorites", text: "Favorite" }),
    ];
    if (ACTIVE.has(job.status)) actions.push(h("button", { type: "button", class: "danger", disabled: job.cancel_requested, onclick: () => cancelJob(job.id), text: job.cancel_requested ? "Cancellation requested" : "Cancel" }));
    else actions.push(h("button", { type: "button", onclick: () => toggleHidden(job.id, job.deleted), text: job.deleted ? "Restore" : "Hide" }));
    $("job-dialog-actions").replaceChildren(...actions);
  }

  render() {
    const job = this.job;
    if (!job) return;
    $("job-dialog-title").textContent = `Job ${job.status}`;
    this.renderActions(job);
    const request = job.request || {};
    const result = job.result || null;
    const parameters = request.parameters || {};
    const effective = result ? result.effective : null;
    const sections = [];

    sections.push(this.images(job));
    sections.push(h("section", {}, h("h3", { text: "Prompt" }), h("p", { class: "prose", text: request.prompt || "" })));
    if (request.negative_prompt) sections.push(h("section", {}, h("h3", { text: "Negative prompt" }), h("p", { class: "prose", text: request.negative_prompt })));
    if (result && result.revised_prompt) sections.push(h("section", {}, h("h3", { text: "Revised prompt" }), h("p", { class: "prose", text: result.revised_prompt })));
    if (job.error) sections.push(errorPanel(job.error));

    const timings = result ? result.timings : {};
    const size = effective ? effective.size : parameters.size || "auto";
    sections.push(
      h(
        "section",
        {},
        h("h3", { text: "Metadata" }),
        definitionList([
          ["Status", job.status],
          ["Created", formatTime(job.created)],
          job.started ? ["Started", formatTime(job.started)] : null,
          job.completed ? ["Completed", formatTime(job.completed)] : null,
          ["Provider", result ? result.provider : (request.routing && request.routing.provider) || "default"],
          ["Model", result ? result.model : (request.routing && request.routing.model) || "default"],
          ["Operation", request.operation],
          ["Progress", job.progress ? `${job.progress.stage.replace(/_/g, " ")}` : "–"],
          ["Cancel requested", job.cancel_requested ? "yes" : "no"],
          ["Outputs", result ? `${result.data.length} of ${(effective && effective.n) || parameters.n || 1}` : `${parameters.n || 1} requested`],
          ["Size", size],
          ["Quality", (effective || parameters).quality || "auto"],
          ["Format", (effective || parameters).output_format || "png"],
          ["Queue time", formatMs(timings.queue_ms)],
          ["Input time", formatMs(timings.input_ms)],
          ["Provider time", formatMs(timings.provider_ms)],
          ["Artifact time", formatMs(timings.artifact_ms)],
          ["Total time", formatMs(timings.total_ms)],
          ["Partial images", job.progress ? String(job.progress.partial_images) : "0"],
        ]),
      ),
    );
    if (result) {
      sections.push(parameterTable(result.requested, result.effective));
      if (result.normalizations && result.normalizations.length) {
        sections.push(h("section", {}, h("h3", { text: "Normalizations" }), normalizationTable(result)));
      }
      if (result.attempts && result.attempts.length) {
        sections.push(
          h(
            "section",
            {},
            h("h3", { text: "Provider attempts" }),
            table(["Provider", "Model", "Outcome", "Error", "Duration"], result.attempts.map((item) => [item.provider, item.model || "–", item.outcome, item.error_code || "–", formatMs(item.duration_ms)])),
          ),
        );
      }
      if (result.warnings && result.warnings.length) {
        sections.push(h("section", {}, h("h3", { text: "Warnings" }), warningList(result)));
      }
      if (result.failures && result.failures.length) {
        sections.push(
          h(
            "section",
            {},
            h("h3", { text: "Failed outputs" }),
            table(["Output", "Code", "Message"], result.failures.map((item) => [String(item.index), item.error.code, item.error.message])),
          ),
        );
      }
    }
    sections.push(h("details", { class: "raw" }, h("summary", { text: "Raw metadata" }), h("pre", {}, h("code", { text: JSON.stringify(redactInputs(job), null, 2) }))));
    $("job-dialog-body").replaceChildren(...sections);
  }

  images(job) {
    const section = h("section", { class: "images" }, h("h3", { text: "Images" }));
    const data = job.result ? job.result.data.filter((item) => item.type === "artifact") : [];
    const preview = ACTIVE.has(job.status) ? this.previewUrl : null;
    this.previewFigure = h(
      "figure",
      { class: "preview", hidden: !(ACTIVE.has(job.status) && preview) },
      h("img", { alt: "Latest partial preview", src: preview || null }),
      h("figcaption", { text: "Live partial preview" }),
    );
    section.append(this.previewFigure);
    if (!data.length && !ACTIVE.has(job.status)) section.append(h("p", { class: "muted", text: "This job has no images." }));
    if (!data.length && ACTIVE.has(job.status) && !preview) section.append(h("p", { class: "muted", text: "Images appear here when the job finishes." }));
    const grid = h("div", { class: "image-grid" });
    for (const item of data) grid.append(this.figure(item));
    section.append(grid);
    return section;
  }

  figure(item) {
    // The dialog shows a 1024-px preview; the full image (possibly tens of MB) is fetched
    // only when the user opens or downloads it.
    const previewKey = `detail:${item.id}`;
    const fullKey = `full:${item.id}`;
    for (const key of [previewKey, fullKey]) if (!this.imageKeys.includes(key)) this.imageKeys.push(key);
    const full = () => blobs.get(fullKey, () => api.artifact(item.id));
    const image = h("img", { alt: `Output ${item.index + 1}: ${item.name}`, width: item.width, height: item.height });
    const open = h("button", { type: "button", class: "image-button", title: "Open the full image in a new tab" }, image);
    open.addEventListener("click", () => openFullImage(full));
    const download = h("button", { type: "button", text: "Download", onclick: () => downloadFullImage(full, item.name.split("/").pop()) });
    const copy = h("button", { type: "button", text: "Copy path", onclick: () => copyText(item.name) });
    blobs.get(previewKey, () => api.thumbnail(item.id, DETAIL_PREVIEW_EDGE)).then((url) => {
      if (url) image.src = url;
    }, () => {
      image.alt = `Output ${item.index + 1} could not be loaded`;
    });
    return h(
      "figure",
      { class: "output" },
      open,
      h("figcaption", {}, h("span", { class: "path", text: item.name }), h("span", { class: "muted", text: `${item.width}×${item.height} · ${item.format} · ${formatBytes(item.bytes)}` })),
      h("div", { class: "figure-actions" }, copy, download),
    );
  }
}

/** Open a full image in a new tab: the tab opens at once (so no popup blocker objects),
 *  then shows the authenticated blob once it has arrived. */
async function openFullImage(load) {
  const tab = window.open("", "_blank");
  if (tab) tab.opener = null;
  try {
    const url = await load();
    if (!url) throw new Error("the image is no longer available");
    if (tab) tab.location.replace(url);
    else window.location.assign(url);
  } catch (error) {
    if (tab) tab.close();
    toast(`The image could not be opened: ${describeError(error)}`);
  }
}

async function downloadFullImage(load, filename) {
  try {
    const url = await load();
    if (!url) throw new Error("the image is no longer available");
    saveUrl(url, filename);
  } catch (error) {
    toast(`The image could not be downloaded: ${describeError(error)}`);
  }
}

function redactInputs(job) {
  const copy = JSON.parse(JSON.stringify(job));
  const request = copy.request || {};
  const strip = (input) => {
    if (input && input.data_url) input.data_url = `${input.data_url.slice(0, input.data_url.indexOf(",") + 1)}… (${input.data_url.length} characters)`;
    if (input && input.data) input.data = `… (${input.data.length} characters)`;
  };
  for (const list of [request.images, request.reference_images]) if (Array.isArray(list)) list.forEach(strip);
  if (request.mask) strip(request.mask);
  return copy;
}

export const jobDialog = new JobDialog();

export function wireJobDialog() {
  $("job-dialog").addEventListener("close", () => jobDialog.close());
  onJobChanged((job) => jobDialog.update(job));
  gallery.addEventListener("change", () => jobDialog.followGallery());
  gallery.addEventListener("poll", () => jobDialog.refreshIfActive());
}
