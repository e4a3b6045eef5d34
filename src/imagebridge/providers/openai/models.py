"""What each OpenAI image model accepts, as capability documents.

A :class:`ModelProfile` is the documented surface of one model family: counts, sizes,
enumerated values, inputs, masks and streaming. :func:`profile_for` maps a model name to
its profile (GPT image names by prefix, DALL-E by name, anything else to a plain
profile for OpenAI-compatible servers), and :func:`apply_overrides` narrows or widens a
profile with an instance's ``capabilities`` table. :meth:`ModelProfile.capabilities`
turns the result into the contract's :class:`ProviderCapabilities`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from imagebridge._version import __version__
from imagebridge.contract.capabilities import (
    InputCapabilities,
    ProviderCapabilities,
    SizeCapabilities,
    U8Range,
)
from imagebridge.contract.enums import (
    Background,
    ImageAction,
    InputFidelity,
    Moderation,
    OutputFormat,
    Quality,
    SupportLevel,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.shared import native_batch, native_inputs

__all__ = [
    "DEFAULT_OPENAI_MODEL",
    "KNOWN_OPENAI_MODELS",
    "CapabilityOverrides",
    "ModelFamily",
    "ModelProfile",
    "apply_overrides",
    "is_documented_model",
    "profile_for",
]

MB = 1000 * 1000
DEFAULT_OPENAI_MODEL = "gpt-image-1.5"
"""The Images API's default edit model, used when ``providers.openai.model`` is unset."""

_GPT_STANDARD_SIZES = ("1024x1024", "1536x1024", "1024x1536")


class ModelFamily:
    """How a model is spoken to on the wire (parameter names and value mappings)."""

    GPT_IMAGE = "gpt-image"
    DALL_E_3 = "dall-e-3"
    DALL_E_2 = "dall-e-2"
    GENERIC = "generic"


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """The documented surface of one model; every field is an upper bound we advertise."""

    family: str
    generation: bool = True
    edits: bool = True
    native_max: int = 1
    sizes: SizeCapabilities = field(
        default_factory=lambda: SizeCapabilities(auto=True, allowed=list(_GPT_STANDARD_SIZES))
    )
    qualities: tuple[Quality, ...] = (Quality.AUTO,)
    output_formats: tuple[OutputFormat, ...] = (OutputFormat.PNG,)
    backgrounds: tuple[Background, ...] = (Background.AUTO,)
    transparent_background: SupportLevel = SupportLevel.UNSUPPORTED
    moderation: tuple[Moderation, ...] = (Moderation.AUTO,)
    input_fidelities: tuple[InputFidelity, ...] = ()
    max_edit_images: int = 1
    max_reference_images: int = 0
    max_image_bytes: int = 50 * MB
    masks: bool = True
    max_mask_bytes: int = 4 * MB
    partial_images: int = 0
    user: bool = True
    revised_prompt: SupportLevel = SupportLevel.UNSUPPORTED
    max_prompt_chars: int | None = None
    """Longest prompt the model takes; longer ones are refused before any call."""
    sends_response_format: bool = True
    """Ask for ``b64_json`` explicitly (GPT image models reject the parameter)."""
    square_png_sources: bool = False
    """Edit sources must be square PNGs (dall-e-2)."""
    mask_needs_alpha: bool = True
    """The mask marks the area to edit with transparency (OpenAI models)."""
    quality_wire: Mapping[Quality, str] | None = None
    """Contract quality → wire value (``None``: the value itself); ``auto`` is never sent."""

    def wire_quality(self, quality: Quality) -> str | None:
        """The ``quality`` value to send, or ``None`` to leave the server's default."""
        if quality is Quality.AUTO:
            return None
        if self.quality_wire is None:
            return quality.value
        return self.quality_wire.get(quality)

    def with_native_max(self, limit: int | None) -> ModelProfile:
        """The profile with another per-call count (``None`` keeps the profile's)."""
        if limit is None:
            return self
        return dataclasses.replace(self, native_max=limit)

    def capabilities(self, provider: str, model: str) -> ProviderCapabilities:
        """The contract document for this profile under ``provider``/``model``."""
        count, batching = native_batch(max(1, min(self.native_max, 255)))

        def inputs(count: int, each: int) -> InputCapabilities:
            if count <= 0:
                return InputCapabilities.unsupported()
            return native_inputs(count, each, each * count)

        return ProviderCapabilities(
            provider=provider,
            implementation_version=__version__,
            model=model,
            generation=self.generation,
            edits=self.edits and self.max_edit_images > 0,
            count=count,
            batching=batching,
            sizes=self.sizes.model_copy(deep=True),
            aspect_ratio=SupportLevel.UNSUPPORTED,
            resolution=SupportLevel.UNSUPPORTED,
            qualities=list(self.qualities),
            output_formats=list(self.output_formats),
            backgrounds=list(self.backgrounds),
            transparent_background=self.transparent_background,
            moderation=list(self.moderation),
            negative_prompt=SupportLevel.EMULATED,
            revised_prompt=self.revised_prompt,
            user_attribution=SupportLevel.NATIVE if self.user else SupportLevel.UNSUPPORTED,
            input_fidelities=list(self.input_fidelities),
            actions=[ImageAction.AUTO],
            reference_images=inputs(self.max_reference_images, self.max_image_bytes),
            edit_images=inputs(self.max_edit_images if self.edits else 0, self.max_image_bytes),
            masks=inputs(1 if self.masks and self.edits else 0, self.max_mask_bytes),
            partial_images=U8Range(min=0, max=max(0, min(self.partial_images, 255))),
            persistent_sessions=False,
            explicit_threads=False,
        )


_GPT_IMAGE = ModelProfile(
    family=ModelFamily.GPT_IMAGE,
    native_max=10,
    qualities=(Quality.AUTO, Quality.LOW, Quality.MEDIUM, Quality.HIGH),
    output_formats=(OutputFormat.PNG, OutputFormat.JPEG, OutputFormat.WEBP),
    backgrounds=(Background.AUTO, Background.OPAQUE, Background.TRANSPARENT),
    transparent_background=SupportLevel.NATIVE,
    moderation=(Moderation.AUTO, Moderation.LOW),
    input_fidelities=(InputFidelity.LOW, InputFidelity.HIGH),
    max_edit_images=16,
    max_reference_images=16,
    partial_images=3,
    max_prompt_chars=32_000,
    sends_response_format=False,
)

_PROFILES: dict[str, ModelProfile] = {
    "gpt-image-1": _GPT_IMAGE,
    "gpt-image-1.5": _GPT_IMAGE,
    "gpt-image-1-mini": dataclasses.replace(_GPT_IMAGE, input_fidelities=()),
    "gpt-image-2": dataclasses.replace(
        _GPT_IMAGE,
        sizes=SizeCapabilities(
            auto=True,
            allowed=list(_GPT_STANDARD_SIZES),
            arbitrary=True,
            min_edge=16,
            max_edge=3840,
            edge_multiple=16,
            max_pixels=3840 * 2160,
            max_aspect_ratio=3.0,
        ),
    ),
    "chatgpt-image-latest": dataclasses.replace(_GPT_IMAGE, generation=False),
    "dall-e-3": ModelProfile(
        family=ModelFamily.DALL_E_3,
        edits=False,
        native_max=1,
        sizes=SizeCapabilities(auto=True, allowed=["1024x1024", "1792x1024", "1024x1792"]),
        qualities=(Quality.AUTO, Quality.MEDIUM, Quality.HIGH),
        masks=False,
        max_edit_images=0,
        revised_prompt=SupportLevel.NATIVE,
        max_prompt_chars=4_000,
        quality_wire={Quality.MEDIUM: "standard", Quality.HIGH: "hd"},
    ),
    "dall-e-2": ModelProfile(
        family=ModelFamily.DALL_E_2,
        native_max=10,
        sizes=SizeCapabilities(auto=True, allowed=["256x256", "512x512", "1024x1024"]),
        max_edit_images=1,
        max_image_bytes=4 * MB,
        max_prompt_chars=1_000,
        square_png_sources=True,
    ),
}
_PROFILES["gpt-image-2-2026-04-21"] = _PROFILES["gpt-image-2"]

KNOWN_OPENAI_MODELS: tuple[str, ...] = (
    "gpt-image-1.5",
    "gpt-image-1",
    "gpt-image-1-mini",
    "gpt-image-2",
    "gpt-image-2-2026-04-21",
    "chatgpt-image-latest",
    "dall-e-3",
    "dall-e-2",
)
"""The models the official provider serves (its default model is listed first)."""

_GENERIC = ModelProfile(
    family=ModelFamily.GENERIC,
    sizes=SizeCapabilities(auto=True, arbitrary=True, min_edge=8, max_edge=4096, edge_multiple=8),
    mask_needs_alpha=False,
)


def profile_for(model: str) -> ModelProfile:
    """The documented profile of ``model``; unknown GPT image names get the newest GPT
    image profile, anything else the plain profile for compatible servers."""
    profile = _PROFILES.get(model)
    if profile is not None:
        return profile
    if model.startswith(("gpt-image-", "chatgpt-image-")):
        return _GPT_IMAGE
    return _GENERIC


def is_documented_model(model: str) -> bool:
    """Whether ``model`` has a documented profile of its own (so its limits are hard)."""
    return profile_for(model).family != ModelFamily.GENERIC


@dataclass(frozen=True, slots=True)
class CapabilityOverrides:
    """An instance's ``capabilities`` table in plain values (``None``: keep the profile's)."""

    generation: bool | None = None
    edits: bool | None = None
    sizes: tuple[str, ...] | None = None
    qualities: tuple[str, ...] | None = None
    output_formats: tuple[str, ...] | None = None
    backgrounds: tuple[str, ...] | None = None
    transparent_background: str | None = None
    moderation: tuple[str, ...] | None = None
    input_fidelities: tuple[str, ...] | None = None
    masks: bool | None = None
    max_edit_images: int | None = None
    max_reference_images: int | None = None
    partial_images: int | None = None
    user: bool | None = None


E = TypeVar("E", Quality, OutputFormat, Background, Moderation, InputFidelity)


def _members(kind: type[E], values: Sequence[str] | None, current: tuple[E, ...]) -> tuple[E, ...]:
    if values is None:
        return current
    try:
        return tuple(dict.fromkeys(kind(value) for value in values))
    except ValueError:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            f"capability override lists an unknown {kind.__name__} value",
        ) from None


def _sizes(values: Sequence[str] | None, current: SizeCapabilities) -> SizeCapabilities:
    if values is None:
        return current
    explicit = [value for value in values if value != "auto"]
    try:
        return SizeCapabilities(auto="auto" in values, allowed=explicit)
    except ValueError:
        raise BridgeError(
            ErrorCode.CONFIGURATION, 'capability override sizes must be "auto" or WxH'
        ) from None


def apply_overrides(profile: ModelProfile, overrides: CapabilityOverrides | None) -> ModelProfile:
    """``profile`` with every set override applied (configuration errors for bad values)."""
    if overrides is None:
        return profile
    o = overrides
    backgrounds = _members(Background, o.backgrounds, profile.backgrounds)
    transparency = profile.transparent_background
    if o.transparent_background is not None:
        try:
            transparency = SupportLevel(o.transparent_background)
        except ValueError:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "transparent_background must be native, emulated or unsupported",
            ) from None
        if transparency is SupportLevel.NATIVE:
            backgrounds = tuple(dict.fromkeys((*backgrounds, Background.TRANSPARENT)))
        else:
            backgrounds = tuple(b for b in backgrounds if b is not Background.TRANSPARENT)
    elif o.backgrounds is not None:
        native = Background.TRANSPARENT in backgrounds
        if native:
            transparency = SupportLevel.NATIVE
        elif transparency is SupportLevel.NATIVE:
            transparency = SupportLevel.UNSUPPORTED

    return dataclasses.replace(
        profile,
        generation=profile.generation if o.generation is None else o.generation,
        edits=profile.edits if o.edits is None else o.edits,
        sizes=_sizes(o.sizes, profile.sizes),
        qualities=_members(Quality, o.qualities, profile.qualities),
        output_formats=_members(OutputFormat, o.output_formats, profile.output_formats),
        backgrounds=backgrounds,
        transparent_background=transparency,
        moderation=_members(Moderation, o.moderation, profile.moderation),
        input_fidelities=_members(InputFidelity, o.input_fidelities, profile.input_fidelities),
        masks=profile.masks if o.masks is None else o.masks,
        max_edit_images=(
            profile.max_edit_images if o.max_edit_images is None else o.max_edit_images
        ),
        max_reference_images=(
            profile.max_reference_images
            if o.max_reference_images is None
            else o.max_reference_images
        ),
        partial_images=profile.partial_images if o.partial_images is None else o.partial_images,
        user=profile.user if o.user is None else o.user,
    )
