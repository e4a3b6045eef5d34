// Iterating from an image: "Edit this" (it becomes the composer's edit source), "Vary" (the
// same request again, new images), "Reuse settings" (the composer takes the request's
// settings); and resetting the composer.

import { api } from "./bridge.js";
import { applyValues, clearFormErrors, fieldOf, loadCapabilities, writeValues } from "./composer.js";
import { defaultValues, valuesFromTemplate } from "./form.js";
import { gallery } from "./gallery.js";
import { submitRequest } from "./run.js";
import { clearInputs, setEditSource } from "./sources.js";
import { $, describeError, toast } from "./ui.js";

function focusComposer() {
  const prompt = fieldOf("prompt");
  $("composer").scrollIntoView({ block: "start", behavior: "smooth" });
  prompt.focus({ preventScroll: true });
}

/** The image `image` (a gallery entry's) becomes the edit source; the prompt waits. */
export async function editThis(image) {
  try {
    const blob = await api.artifact(image.id);
    await setEditSource(blob, String(image.name).split("/").pop());
    toast("The image is the edit source: describe the change, or paint a mask first.");
    focusComposer();
    return true;
  } catch (error) {
    toast(`The image could not be used: ${describeError(error)}`);
    return false;
  }
}

/** The request of `jobId` again, unchanged: new images with the same prompt and settings. */
export async function vary(jobId) {
  try {
    const job = await gallery.fullJob(jobId);
    const request = JSON.parse(JSON.stringify(job.request));
    delete request.idempotency_key;
    const first = request.operation === "edit" && request.images && request.images[0];
    const source = first && first.data_url ? { dataUrl: first.data_url, name: first.filename || "source" } : null;
    await submitRequest(request, source);
    return true;
  } catch (error) {
    toast(`The variation could not be started: ${describeError(error)}`);
    return false;
  }
}

/** The composer takes the settings of `jobId` (its prompt included, its images not). */
export async function reuseSettings(jobId) {
  try {
    const job = await gallery.fullJob(jobId);
    const values = valuesFromTemplate(job.request);
    if (values.operation === "edit") values.operation = "generate";
    const known = await applyValues(values);
    toast(known ? "The composer has this request's settings." : `The composer has this request's settings; its provider ${values.provider} is not available here.`);
    focusComposer();
    return true;
  } catch (error) {
    toast(`The settings could not be read: ${describeError(error)}`);
    return false;
  }
}

export function resetComposer() {
  const provider = fieldOf("provider").value;
  writeValues(defaultValues());
  fieldOf("provider").value = provider;
  clearInputs();
  clearFormErrors();
  loadCapabilities();
}

export function wireActions() {
  $("reset-button").addEventListener("click", resetComposer);
}
