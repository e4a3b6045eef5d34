// Presets: apply one to the composer, save the composer as one, edit or delete one.

import { ApiError } from "./api.js";
import { api } from "./bridge.js";
import { applyValues, readValues } from "./composer.js";
import { checkPreset } from "./checks.js";
import { templateFromValues, valuesFromTemplate } from "./form.js";
import { $, confirmAction, describeError, h, toast } from "./ui.js";

let presets = [];

let presetMode = "create";

export async function loadPresets(select = null) {
  presets = await api.listPresets();
  const element = $("preset-select");
  const current = select ?? element.value;
  element.replaceChildren(h("option", { value: "", text: "No preset" }));
  for (const preset of presets) {
    element.append(h("option", { value: preset.name, text: preset.description ? `${preset.name} — ${preset.description}` : preset.name }));
  }
  element.value = presets.some((preset) => preset.name === current) ? current : "";
  updatePresetButtons();
}

function selectedPreset() {
  const name = $("preset-select").value;
  return presets.find((preset) => preset.name === name) || null;
}

function updatePresetButtons() {
  const none = !selectedPreset();
  for (const id of ["preset-apply", "preset-edit", "preset-delete"]) $(id).disabled = none;
}

async function applyPreset() {
  const preset = selectedPreset();
  if (!preset) return;
  const values = valuesFromTemplate(preset.template);
  const known = await applyValues(values);
  toast(known ? `Applied preset ${preset.name}.` : `Applied preset ${preset.name}; its provider ${values.provider} is not available here.`);
}

function openPresetDialog(mode) {
  presetMode = mode;
  const preset = selectedPreset();
  const name = $("preset-name");
  $("preset-message").hidden = true;
  if (mode === "edit" && preset) {
    $("preset-dialog-title").textContent = `Edit preset ${preset.name}`;
    name.value = preset.name;
    name.readOnly = true;
    $("preset-description").value = preset.description || "";
    $("preset-replace-field").hidden = false;
    $("preset-replace").checked = true;
  } else {
    $("preset-dialog-title").textContent = "Save the form as a preset";
    name.value = "";
    name.readOnly = false;
    $("preset-description").value = "";
    $("preset-replace-field").hidden = true;
  }
  $("preset-dialog").showModal();
  (mode === "edit" ? $("preset-description") : name).focus();
}

async function savePreset(event) {
  event.preventDefault();
  const message = $("preset-message");
  const name = $("preset-name").value.trim();
  const description = $("preset-description").value;
  const issues = checkPreset(name, description);
  if (issues.length) {
    message.textContent = issues.map((issue) => issue.message).join(" ");
    message.hidden = false;
    return;
  }
  const body = description.trim() ? { description } : {};
  try {
    if (presetMode === "edit") {
      const preset = selectedPreset();
      const template = $("preset-replace").checked ? templateFromValues(readValues()) : preset.template;
      await api.replacePreset(name, { ...body, template });
    } else {
      await api.createPreset({ name, ...body, template: templateFromValues(readValues()) });
    }
  } catch (error) {
    const details = error instanceof ApiError ? error.issues.map((issue) => `${issue.field}: ${issue.message}`) : [];
    message.textContent = [describeError(error), ...details].join(" ");
    message.hidden = false;
    return;
  }
  $("preset-dialog").close();
  await loadPresets(name);
  toast(presetMode === "edit" ? `Preset ${name} updated.` : `Preset ${name} saved.`);
}

async function deletePreset() {
  const preset = selectedPreset();
  if (!preset) return;
  const confirmed = await confirmAction("Delete preset", `Delete the preset ${preset.name}? This cannot be undone.`, "Delete");
  if (!confirmed) return;
  try {
    await api.deletePreset(preset.name);
    toast(`Preset ${preset.name} deleted.`);
  } catch (error) {
    toast(`The preset could not be deleted: ${describeError(error)}`);
  }
  await loadPresets("");
}

export function wirePresets() {
  $("preset-select").addEventListener("change", updatePresetButtons);
  $("preset-apply").addEventListener("click", applyPreset);
  $("preset-save").addEventListener("click", () => openPresetDialog("create"));
  $("preset-edit").addEventListener("click", () => openPresetDialog("edit"));
  $("preset-delete").addEventListener("click", deletePreset);
  $("preset-form").addEventListener("submit", savePreset);
}
