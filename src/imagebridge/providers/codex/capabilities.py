"""Capability documents of the two Codex HTTP providers.

``codex-responses`` advertises exactly the original's document.
``codex-images`` advertises only what the dedicated images route is measured to honour
(docs/providers.md): the prompt, the background (with native alpha) and input
images. Quality, format, moderation and model are not honoured there, so they are
``auto``/PNG only; the three standard sizes are accepted as shape requests (sent, and
emulated with an aspect sentence) and the size actually produced is reported.
Neither takes a mask: both say ``masks: emulated`` and the engine composites the edit
through the mask (strict compatibility refuses it, as the original did).
Both have a native count of 1: the application wraps them in the fan-out decorator.
"""

from __future__ import annotations

from typing import Final

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
from imagebridge.providers.codex.inputs import CodexInputBounds
from imagebridge.providers.shared import emulated_mask, native_batch, native_inputs

__all__ = [
    "IMAGES_ROUTE_SIZES",
    "RESPONSES_BASE_SIZES",
    "RESPONSES_LARGE_SIZES",
    "images_capabilities",
    "responses_capabilities",
    "responses_sizes",
]

RESPONSES_BASE_SIZES: Final = ("1024x1024", "1536x1024", "1024x1536")
RESPONSES_LARGE_SIZES: Final = ("2048x2048", "2048x1152", "3840x2160", "2160x3840")
IMAGES_ROUTE_SIZES: Final = RESPONSES_BASE_SIZES
_SMALL_MODELS: Final = frozenset({"gpt-image-1", "gpt-image-1-mini"})
_NATIVE_ALPHA_EXCEPTION: Final = "gpt-image-2"


def responses_sizes(model: str) -> list[str]:
    """Explicit sizes the Responses image tool takes for ``model``."""
    if model in _SMALL_MODELS:
        return list(RESPONSES_BASE_SIZES)
    return [*RESPONSES_BASE_SIZES, *RESPONSES_LARGE_SIZES]


def _inputs(bounds: CodexInputBounds) -> InputCapabilities:
    return native_inputs(bounds.max_count, bounds.max_bytes_each, bounds.max_bytes_total)


def responses_capabilities(
    provider: str, model: str, bounds: CodexInputBounds
) -> ProviderCapabilities:
    """``codex-responses`` for one image model (the model is checked by the caller)."""
    count, batching = native_batch(1)
    native_alpha = model != _NATIVE_ALPHA_EXCEPTION
    backgrounds = [Background.AUTO, Background.OPAQUE]
    if native_alpha:
        backgrounds.append(Background.TRANSPARENT)
    fidelities = (
        [InputFidelity.HIGH]
        if model == _NATIVE_ALPHA_EXCEPTION
        else [InputFidelity.LOW, InputFidelity.HIGH]
    )
    return ProviderCapabilities(
        provider=provider,
        implementation_version=__version__,
        model=model,
        experimental=False,
        generation=True,
        edits=True,
        count=count,
        batching=batching,
        sizes=SizeCapabilities(auto=True, allowed=responses_sizes(model)),
        aspect_ratio=SupportLevel.EMULATED,
        resolution=SupportLevel.EMULATED,
        qualities=list(Quality),
        output_formats=list(OutputFormat),
        backgrounds=backgrounds,
        transparent_background=SupportLevel.NATIVE if native_alpha else SupportLevel.EMULATED,
        moderation=[Moderation.AUTO, Moderation.LOW],
        negative_prompt=SupportLevel.EMULATED,
        revised_prompt=SupportLevel.NATIVE,
        user_attribution=SupportLevel.UNSUPPORTED,
        input_fidelities=fidelities,
        actions=list(ImageAction),
        reference_images=_inputs(bounds),
        edit_images=_inputs(bounds),
        masks=emulated_mask(bounds.max_bytes_each),
        partial_images=U8Range(min=0, max=3),
        persistent_sessions=False,
        explicit_threads=False,
    )


def images_capabilities(
    provider: str, model: str, bounds: CodexInputBounds
) -> ProviderCapabilities:
    """``codex-images``: what ``/codex/images/{generations,edits}`` honours."""
    count, batching = native_batch(1)
    return ProviderCapabilities(
        provider=provider,
        implementation_version=__version__,
        model=model,
        experimental=True,
        generation=True,
        edits=True,
        count=count,
        batching=batching,
        sizes=SizeCapabilities(auto=True, allowed=list(IMAGES_ROUTE_SIZES)),
        aspect_ratio=SupportLevel.EMULATED,
        resolution=SupportLevel.UNSUPPORTED,
        qualities=[Quality.AUTO],
        output_formats=[OutputFormat.PNG],
        backgrounds=[Background.AUTO, Background.OPAQUE, Background.TRANSPARENT],
        transparent_background=SupportLevel.NATIVE,
        moderation=[Moderation.AUTO],
        negative_prompt=SupportLevel.EMULATED,
        revised_prompt=SupportLevel.UNSUPPORTED,
        user_attribution=SupportLevel.UNSUPPORTED,
        input_fidelities=[],
        actions=[ImageAction.AUTO],
        reference_images=_inputs(bounds),
        edit_images=_inputs(bounds),
        masks=emulated_mask(bounds.max_bytes_each),
        partial_images=U8Range(min=0, max=0),
        persistent_sessions=False,
        explicit_threads=False,
    )
