// Sending a request, and the run it starts: the composer's checks and submission as a
// durable job, then "This run" under the composer with one place per requested image that
// fills in as the job goes (the provider's partial previews where it sends them, then the
// images), an edit's source beside its results, and compare.

import { ApiError } from "./api.js";
import { api } from "./bridge.js";
import { formatBytes, utf8Length } from "./bytes.js";
import { checkValues } from "./checks.js";
import { openCompare } from "./compare.js";
import { clearFormErrors, fieldOf, readValues, revealField, showFormErrors } from "./composer.js";
import { buildRequest } from "./form.js";
import { ACTIVE, gallery } from "./gallery.js";
import { serverLimits } from "./limits.js";
import { selectedInputs } from "./sources.js";
import * as store from "./store.js";
import { $, describeError, h, plural, toast } from "./ui.js";

const POLL_MS = 1000;
const RESULT_EDGE = 512;
const MAX_SLOTS = 16;

class Run {
  constructor() {
    this.job = null;
    this.source = null;
    this.slots = [];
    this.timer = null;
    this.previews = 0;
    this.urls = [];
    this.handlers = { openImage: () => {}, openJob: () => {} };
  }

  connect(handlers) {
    Object.assign(this.handlers, handlers);
  }

  /** Follow a job just created; `source` is the edit source it was made from, if any. */
  start(job, source = null) {
    this.stop();
    this.job = job;
    this.source = source;
    this.previews = 0;
    const wanted = Math.min(MAX_SLOTS, (job.request.parameters && job.request.parameters.n) || 1);
    const list = $("run-images");
    list.replaceChildren();
    if (source) list.append(h("li", { class: "run-slot run-source", dataset: { state: "source" } }, h("img", { src: source.dataUrl, alt: `The source: ${source.name || "image"}` }), h("span", { class: "run-label", text: "Source" })));
    this.slots = Array.from({ length: wanted }, (_, index) => {
      const image = h("img", { alt: "", hidden: true });
      const label = h("span", { class: "run-label", text: `${index + 1}` });
      const open = h("button", { type: "button", class: "run-open", disabled: true, "aria-label": `Image ${index + 1} of ${wanted}: waiting` }, image);
      const node = h("li", { class: "run-slot", dataset: { state: "waiting", index: String(index) } }, open, label);
      list.append(node);
      return { node, image, open, label, artifact: null };
    });
    $("run").hidden = false;
    $("run-compare").hidden = true;
    $("run-details").hidden = false;
    this.show(job);
    this.poll();
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
    for (const url of this.urls) URL.revokeObjectURL(url);
    this.urls = [];
  }

  async poll() {
    const job = this.job;
    if (!job) return;
    if (store.get("paused")) {
      this.timer = setTimeout(() => this.poll(), POLL_MS);
      return;
    }
    let fresh;
    try {
      fresh = await api.getJob(job.id);
    } catch (error) {
      if (this.job !== job) return;
      $("run-status").textContent = `The job could not be read: ${describeError(error)}`;
      this.timer = setTimeout(() => this.poll(), POLL_MS * 3);
      return;
    }
    if (this.job !== job) return;
    this.job = fresh;
    this.show(fresh);
    if (ACTIVE.has(fresh.status)) {
      const count = fresh.progress ? fresh.progress.partial_images : 0;
      if (count > this.previews) {
        this.previews = count;
        this.preview(fresh.id);
      }
      this.timer = setTimeout(() => this.poll(), POLL_MS);
    } else {
      gallery.refresh();
    }
  }

  async preview(id) {
    let found;
    try {
      found = await api.partialPreview(id);
    } catch {
      found = null;
    }
    const slot = found && this.job && this.job.id === id ? this.slots[found.output] : null;
    if (!slot || slot.artifact) return;
    const url = this.keep(URL.createObjectURL(found.blob));
    slot.image.src = url;
    slot.image.alt = `Partial preview of image ${found.output + 1}`;
    slot.image.hidden = false;
    slot.node.dataset.state = "preview";
  }

  keep(url) {
    this.urls.push(url);
    return url;
  }

  show(job) {
    const status = $("run-status");
    if (ACTIVE.has(job.status)) {
      const stage = job.progress ? job.progress.stage.replace(/_/g, " ") : "waiting for a worker";
      status.textContent = `${job.status === "queued" ? "Queued" : "Running"}: ${stage}${job.progress && job.progress.partial_images ? ` · ${plural(job.progress.partial_images, "preview")}` : ""}.`;
      return;
    }
    if (job.error) status.textContent = `${job.status[0].toUpperCase()}${job.status.slice(1)}: ${job.error.code}: ${job.error.message}`;
    const result = job.result;
    if (!result) {
      for (const slot of this.slots) if (!slot.artifact) slot.node.dataset.state = "failed";
      return;
    }
    status.textContent = `Done: ${plural(result.data.length, "image")} from ${result.provider} · ${result.model}${result.failures && result.failures.length ? `, ${result.failures.length} failed` : ""}.`;
    for (const failure of result.failures || []) {
      const slot = this.slots[failure.index];
      if (slot) {
        slot.node.dataset.state = "failed";
        slot.label.textContent = `${failure.index + 1} failed`;
      }
    }
    for (const item of result.data) {
      const slot = this.slots[item.index];
      if (!slot || item.type !== "artifact" || slot.artifact) continue;
      slot.artifact = item;
      slot.node.dataset.state = "done";
      slot.open.disabled = false;
      slot.open.setAttribute("aria-label", `Open image ${item.index + 1}: ${item.width}×${item.height}`);
      slot.open.onclick = () => this.handlers.openImage(item.id, job.id);
      api.thumbnail(item.id, RESULT_EDGE).then((blob) => {
        if (!this.slots.includes(slot)) return;
        slot.image.src = this.keep(URL.createObjectURL(blob));
        slot.image.alt = `Image ${item.index + 1}`;
        slot.image.hidden = false;
      }, () => {
        slot.label.textContent = `${item.index + 1} unavailable`;
      });
    }
    const done = this.slots.filter((slot) => slot.artifact);
    $("run-compare").hidden = !(done.length >= 2 || (this.source && done.length >= 1));
  }

  compare() {
    const done = this.slots.filter((slot) => slot.artifact);
    const full = (item) => async () => this.keep(URL.createObjectURL(await api.artifact(item.id)));
    if (this.source && done.length) {
      openCompare({ label: "Source", load: async () => this.source.dataUrl }, { label: `Edit ${done[0].artifact.index + 1}`, load: full(done[0].artifact) });
    } else if (done.length >= 2) {
      openCompare({ label: `Image ${done[0].artifact.index + 1}`, load: full(done[0].artifact) }, { label: `Image ${done[1].artifact.index + 1}`, load: full(done[1].artifact) });
    }
  }
}

export const run = new Run();

/** Send `request` as a job and follow it under the composer; throws what the bridge said. */
export async function submitRequest(request, source = null) {
  const job = await api.createJob(request);
  toast("Job queued.");
  run.start(job, source);
  gallery.refresh();
  return job;
}

async function submitComposer(event) {
  event.preventDefault();
  clearFormErrors();
  const values = readValues();
  const chosen = selectedInputs();
  const issues = checkValues(values, chosen, store.get("capabilities"), serverLimits());
  if (issues.length) {
    showFormErrors("Please fix these before submitting:", issues);
    const first = issues.find((issue) => fieldOf(issue.field));
    if (first) revealField(fieldOf(first.field));
    return;
  }
  const request = buildRequest(values, chosen);
  const maxBody = serverLimits().body_bytes;
  const size = maxBody ? utf8Length(JSON.stringify(request)) : 0;
  if (maxBody && size > maxBody) {
    showFormErrors(`The request is ${formatBytes(size)}; this bridge accepts at most ${formatBytes(maxBody)}.`, [{ field: "images", message: "Send fewer or smaller images." }]);
    return;
  }
  const button = $("submit-button");
  button.disabled = true;
  try {
    await submitRequest(request, request.operation === "edit" ? chosen.images[0] || null : null);
    fieldOf("idempotency_key").value = "";
  } catch (error) {
    if (error instanceof ApiError) {
      const found = error.issues.map((issue) => ({ field: fieldForIssue(issue.field), message: `${issue.field}: ${issue.message}` }));
      showFormErrors(`The bridge refused the request: ${error.message}${error.code ? ` (${error.code})` : ""}`, found, error.suggestions);
    } else {
      showFormErrors(`The request could not be sent: ${describeError(error)}`, []);
    }
  } finally {
    button.disabled = false;
  }
}

const WIRE_FIELDS = {
  prompt: "prompt",
  negative_prompt: "negative_prompt",
  images: "images",
  mask: "mask",
  reference_images: "references",
  "parameters.n": "n",
  "parameters.size": "size",
  "parameters.aspect_ratio": "aspect_ratio",
  "parameters.resolution": "resolution",
  "parameters.output_compression": "output_compression",
  "parameters.partial_images": "partial_images",
  "parameters.input_fidelity": "input_fidelity",
  "parameters.action": "action",
  "routing.model": "model",
  "routing.fallbacks": "fallbacks",
  "session.key": "session_key",
  "session.thread_id": "thread_id",
  "output.directory": "directory",
  "output.filename": "filename",
  "output.filename_prefix": "filename_prefix",
  "output.collision": "collision",
  "output.metadata": "metadata",
  "output.transparency.key_color": "key_color",
  "output.transparency.transparent_threshold": "transparent_threshold",
  timeout_ms: "timeout_ms",
  idempotency_key: "idempotency_key",
  user: "user",
};

/** The composer control behind a wire field path such as "parameters.n" or "images[0]". */
function fieldForIssue(path) {
  return WIRE_FIELDS[String(path || "").replace(/\[\d+\]$/, "")] || null;
}

export function wireRun() {
  const form = $("compose-form");
  form.addEventListener("submit", submitComposer);
  form.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  $("run-compare").addEventListener("click", () => run.compare());
  $("run-details").addEventListener("click", () => run.job && run.handlers.openJob(run.job.id));
}
