// What the page does to history rows (favourite, hide or restore, cancel) and to images
// (delete), shared by the gallery's selection, the lightbox and the job dialog. Favourite and
// hidden belong to a request (the history records them per row), so they act on every image
// of it; delete removes one image from the bridge (DELETE /v1/artifacts/{id}).

import { api } from "./bridge.js";
import { gallery } from "./gallery.js";
import { confirmAction, describeError, plural, toast } from "./ui.js";

const listeners = new Set();

/** Call `listener(job)` with every job an action changed (the job dialog follows them). */
export function onJobChanged(listener) {
  listeners.add(listener);
}

function changed(job) {
  gallery.rememberJob(job);
  for (const listener of listeners) listener(job);
}

/** Set the favourite marker of the rows `ids` (on when any of them is off). */
export async function setFavorite(ids, favorite) {
  let done = 0;
  for (const id of ids) {
    try {
      changed(await api.updateJob(id, { favorite }));
      done += 1;
    } catch (error) {
      toast(`A request could not be updated: ${describeError(error)}`);
    }
  }
  if (done) toast(favorite ? `Marked ${plural(done, "request")} as favorite.` : `Removed ${plural(done, "request")} from favorites.`);
  if (!favorite && gallery.filters().favorite) await gallery.refresh();
}

export function toggleFavorite(id) {
  const job = gallery.jobs.get(id);
  return setFavorite([id], !(job && job.favorite));
}

/** Hide (soft-delete) or restore the finished rows `ids`. */
export async function setHidden(ids, hidden) {
  let done = 0;
  for (const id of ids) {
    try {
      changed(await api.updateJob(id, { deleted: hidden }));
      done += 1;
    } catch (error) {
      toast(`A request could not be updated: ${describeError(error)}`);
    }
  }
  if (done) toast(hidden ? `Hid ${plural(done, "request")}. Tick Hidden only to find them again.` : `Restored ${plural(done, "request")}.`);
  await gallery.refresh();
}

export function toggleHidden(id, deleted) {
  return setHidden([id], !deleted);
}

export async function cancelJob(id) {
  if (!id) return;
  const confirmed = await confirmAction(
    "Cancel job",
    "Cancellation is best effort: the provider may already have done (and charged for) the work, and a finished image can still arrive.",
    "Cancel job",
  );
  if (!confirmed) return;
  try {
    const job = await api.cancelJob(id);
    changed(job);
    toast(job.status === "cancelled" ? "Job cancelled." : "Cancellation requested.");
    await gallery.refresh();
  } catch (error) {
    toast(`The job could not be cancelled: ${describeError(error)}`);
  }
}

/** Delete images from the bridge after a confirmation; true when any was deleted. */
export async function deleteImages(ids) {
  if (!ids.length) return false;
  const confirmed = await confirmAction(
    ids.length === 1 ? "Delete image" : "Delete images",
    `Delete ${plural(ids.length, "image")} from the bridge? The files are removed and cannot be restored; the requests stay in the history.`,
    "Delete",
  );
  if (!confirmed) return false;
  const gone = [];
  for (const id of ids) {
    try {
      await api.deleteArtifact(id);
      gone.push(id);
    } catch (error) {
      if (error && error.status === 404) gone.push(id);
      else toast(`An image could not be deleted: ${describeError(error)}`);
    }
  }
  gallery.forgetImages(gone);
  if (gone.length) toast(`Deleted ${plural(gone.length, "image")}.`);
  return gone.length > 0;
}
