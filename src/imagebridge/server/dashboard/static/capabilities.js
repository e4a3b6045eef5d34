// How a provider's capability document shapes the composer, free of the DOM: which
// controls it disables and why, which values it refuses, which it locks, and the limits
// of its number inputs; plus the one-line summary the composer and the matrix show.

import { DEFAULT_MAX_IMAGES, SIZE_PRESETS } from "./form.js";

function supportOf(level) {
  return level === "native" || level === "emulated";
}

/**
 * How the provider's capability document shapes the form: for each control name,
 * {disabled, reason}; for each select, the option values it cannot take with a reason;
 * `locked` lists selects with a single possible value; plus limits for number inputs.
 */
export function constraintsFor(caps, operation = "generate") {
  const controls = {};
  const options = {};
  const locked = {};
  const disable = (name, reason) => {
    controls[name] = { disabled: true, reason };
  };
  const refuse = (name, value, reason) => {
    options[name] = options[name] || {};
    options[name][value] = reason;
  };
  const restrict = (name, allowed, all, noun) => {
    for (const value of all) {
      if (!allowed.includes(value)) refuse(name, value, `This provider does not support ${noun} ${value}.`);
    }
    if (allowed.length === 1) locked[name] = { value: allowed[0], reason: `This provider always uses ${noun} ${allowed[0]}.` };
  };
  if (!caps) return { controls, options, locked, limits: { n: { min: 1, max: DEFAULT_MAX_IMAGES }, partial_images: { min: 0, max: 3 } } };

  if (!caps.generation) refuse("operation", "generate", "This provider does not generate new images.");
  if (!caps.edits) refuse("operation", "edit", "This provider does not edit images.");
  if (caps.aspect_ratio === "unsupported") disable("aspect_ratio", "This provider does not support aspect ratios.");
  if (caps.resolution === "unsupported") disable("resolution", "This provider does not support resolution hints.");
  restrict("quality", caps.qualities, ["auto", "low", "medium", "high"], "quality");
  restrict("output_format", caps.output_formats, ["png", "jpeg", "webp"], "format");
  restrict("background", caps.backgrounds, ["auto", "opaque", "transparent"], "background");
  restrict("moderation", caps.moderation, ["auto", "low"], "moderation");
  restrict("action", caps.actions, ["auto", "generate", "edit"], "action");
  if (!caps.input_fidelities.length) disable("input_fidelity", "This provider does not take an input fidelity.");
  else {
    for (const value of ["low", "high"]) {
      if (!caps.input_fidelities.includes(value)) refuse("input_fidelity", value, `This provider does not support input fidelity ${value}.`);
    }
  }
  if (caps.transparent_background === "unsupported") {
    refuse("background", "transparent", "This provider cannot make transparent backgrounds.");
    for (const name of ["transparency_mode", "key_color", "transparent_threshold", "opaque_threshold", "despill"]) {
      disable(name, "This provider cannot make transparent backgrounds.");
    }
  } else if (caps.transparent_background !== "native") {
    refuse("transparency_mode", "native", "This provider has no native transparency; the bridge keys out a chroma colour instead.");
  }
  if (caps.negative_prompt === "unsupported") {
    disable("negative_prompt", "This provider does not support negative prompts.");
    refuse("negative_prompt_policy", "native", "This provider does not support negative prompts natively.");
  } else if (caps.negative_prompt !== "native") {
    refuse("negative_prompt_policy", "native", "This provider has no native negative prompt; it is merged into the prompt.");
  }
  if (caps.revised_prompt === "unsupported") refuse("revised_prompt", "require", "This provider does not report a revised prompt.");
  if (!supportOf(caps.user_attribution)) disable("user", "This provider does not accept user attribution.");
  if (!caps.persistent_sessions) refuse("session_mode", "persistent", "This provider has no persistent sessions.");
  if (!caps.explicit_threads) refuse("session_mode", "thread", "This provider has no explicit threads.");
  if (!supportOf(caps.masks.support) || caps.masks.max_count === 0) disable("mask", "This provider does not accept masks.");
  if (!supportOf(caps.reference_images.support) || caps.reference_images.max_count === 0) disable("references", "This provider does not accept reference images.");
  if (!supportOf(caps.edit_images.support) || caps.edit_images.max_count === 0) disable("images", "This provider does not accept images to edit.");
  if (caps.partial_images.max === 0) disable("partial_images", "This provider does not stream partial previews.");

  const sizes = caps.sizes || {};
  const allowed = sizes.allowed || [];
  if (!sizes.auto) refuse("size", "auto", "This provider needs an explicit size.");
  if (!sizes.arbitrary) {
    for (const value of SIZE_PRESETS) {
      if (value !== "auto" && !allowed.includes(value)) refuse("size", value, `This provider does not render ${value}.`);
    }
    if (!allowed.some((value) => !SIZE_PRESETS.includes(value))) refuse("size", "custom", "This provider only renders its listed sizes.");
  }
  if (sizes.auto && !sizes.arbitrary && !allowed.length) locked.size = { value: "auto", reason: "This provider always chooses the size itself." };
  if (caps.count.min === caps.count.max) locked.n = { value: String(caps.count.min), reason: `This provider makes exactly ${caps.count.min} image(s).` };
  return {
    controls,
    options,
    locked,
    limits: {
      n: { min: caps.count.min, max: caps.count.max },
      partial_images: { min: caps.partial_images.min, max: Math.min(3, caps.partial_images.max) },
    },
    operation,
  };
}

/** A one-line summary of a capability document, for the composer and the matrix. */
export function describeCapabilities(caps) {
  if (!caps) return "";
  const batching = caps.batching.mode === "native"
    ? "native batches"
    : `fan-out, up to ${caps.batching.max_parallel_outputs} in parallel`;
  const sessions = [caps.persistent_sessions ? "persistent sessions" : "", caps.explicit_threads ? "threads" : ""].filter(Boolean).join(" and ") || "no sessions";
  const count = caps.count.min === caps.count.max ? `${caps.count.max} image` : `${caps.count.min}–${caps.count.max} images`;
  return [
    caps.model || "default model",
    `${count} (${batching})`,
    caps.output_formats.join(", "),
    `transparency ${caps.transparent_background}`,
    sessions,
  ].join(" · ");
}
