// The selection bar: what the page does to the selected tiles. A ZIP of the selected images
// (built in the page from the images it may read anyway, zip.js), favourite, hide or restore
// their requests, compare two, delete the images from the bridge.

import { api } from "./bridge.js";
import { formatBytes } from "./bytes.js";
import { openCompare } from "./compare.js";
import { gallery } from "./gallery.js";
import { deleteImages, setFavorite, setHidden } from "./job_actions.js";
import { selection } from "./selection.js";
import { $, confirmAction, describeError, plural, saveUrl, toast } from "./ui.js";
import { MAX_ZIP_BYTES, uniqueNames, zipBlob } from "./zip.js";

const ZIP_CONFIRM_BYTES = 512 * 1024 * 1024;
const ZIP_CONCURRENCY = 3;
const URL_LIFETIME_MS = 60_000;

function selected() {
  return gallery.entries.filter((item) => selection.has(item.key));
}

function selectedImages() {
  return selected().filter((item) => item.image);
}

function selectedJobs() {
  return [...new Set(selected().map((item) => item.job))];
}

function basename(name) {
  return String(name).split("/").pop();
}

export function renderSelectionBar() {
  const count = selection.size;
  $("selection-bar").hidden = count === 0;
  if (!count) return;
  const images = selectedImages();
  $("selection-count").textContent = `${plural(count, "item")} selected`;
  $("sel-zip").disabled = images.length === 0;
  $("sel-delete").disabled = images.length === 0;
  $("sel-compare").hidden = images.length !== 2;
  const jobs = selectedJobs().map((id) => gallery.jobs.get(id)).filter(Boolean);
  const finished = jobs.filter((job) => !["queued", "running"].includes(job.status));
  $("sel-hide").disabled = finished.length === 0;
  $("sel-hide-label").textContent = gallery.filters().hidden ? "Restore" : "Hide";
  const allFavorite = jobs.length > 0 && jobs.every((job) => job.favorite);
  $("sel-favorite").setAttribute("aria-pressed", allFavorite ? "true" : "false");
}

async function fetchAll(images, progress) {
  const blobs = new Array(images.length);
  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < images.length) {
      const index = next;
      next += 1;
      blobs[index] = await api.artifact(images[index].image.id);
      done += 1;
      progress(done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(ZIP_CONCURRENCY, images.length) }, worker));
  return blobs;
}

export async function downloadZip() {
  const images = selectedImages();
  if (!images.length) return;
  const total = images.reduce((sum, item) => sum + item.image.bytes, 0);
  if (total > MAX_ZIP_BYTES) {
    toast(`The selection is ${formatBytes(total)}; one ZIP holds at most 4 GiB.`);
    return;
  }
  if (total > ZIP_CONFIRM_BYTES) {
    const confirmed = await confirmAction("Download a large ZIP", `The ${plural(images.length, "image")} add up to ${formatBytes(total)}, which this tab holds in memory while it builds the ZIP.`, "Download");
    if (!confirmed) return;
  }
  const button = $("sel-zip");
  button.disabled = true;
  try {
    const blobs = await fetchAll(images, (done) => {
      $("selection-count").textContent = `Fetching ${done} of ${images.length}…`;
    });
    const names = uniqueNames(images.map((item) => basename(item.image.name)));
    const files = images.map((item, index) => ({ name: names[index], blob: blobs[index], modified: new Date(gallery.jobs.get(item.job).created * 1000) }));
    const url = URL.createObjectURL(await zipBlob(files));
    const stamp = new Date().toISOString().slice(0, 19).replace(/[T:]/g, "-");
    saveUrl(url, `imagegen-bridge-${stamp}.zip`);
    setTimeout(() => URL.revokeObjectURL(url), URL_LIFETIME_MS);
    toast(`ZIP of ${plural(images.length, "image")} (${formatBytes(total)}) downloaded.`);
  } catch (error) {
    toast(`The ZIP could not be made: ${describeError(error)}`);
  } finally {
    button.disabled = false;
    renderSelectionBar();
  }
}

function compareSelected() {
  const [a, b] = selectedImages();
  if (!a || !b) return;
  const label = (item) => {
    const job = gallery.jobs.get(item.job);
    return `${item.position + 1}/${job.images} · ${job.prompt.slice(0, 60)}`;
  };
  const load = (item) => async () => URL.createObjectURL(await api.artifact(item.image.id));
  openCompare({ label: label(a), load: load(a), owned: true }, { label: label(b), load: load(b), owned: true });
}

export function wireBulk() {
  selection.addEventListener("change", renderSelectionBar);
  gallery.addEventListener("change", renderSelectionBar);
  $("sel-zip").addEventListener("click", downloadZip);
  $("sel-favorite").addEventListener("click", async () => {
    const jobs = selectedJobs();
    await setFavorite(jobs, $("sel-favorite").getAttribute("aria-pressed") !== "true");
    renderSelectionBar();
  });
  $("sel-hide").addEventListener("click", async () => {
    const finished = selectedJobs().filter((id) => !["queued", "running"].includes((gallery.jobs.get(id) || {}).status));
    await setHidden(finished, !gallery.filters().hidden);
    selection.clear();
  });
  $("sel-compare").addEventListener("click", compareSelected);
  $("sel-delete").addEventListener("click", async () => {
    if (await deleteImages(selectedImages().map((item) => item.image.id))) selection.clear();
  });
  $("sel-clear").addEventListener("click", () => selection.clear());
}
