"""What the ``codex-app-server`` provider can do.

codex decides almost everything itself: one image per turn, ``auto`` size, quality,
background and moderation, PNG out. Transparency is emulated by the engine's chroma key,
negative prompts are merged into the prompt, and masks are emulated by the engine's
compositing (strict compatibility refuses them with ``CODEX_RASTER_MASK_UNSUPPORTED``).
Up to five edit sources and five references are staged as files for each turn.
"""

from __future__ import annotations

from imagebridge._version import __version__
from imagebridge.contract.capabilities import (
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
from imagebridge.providers.shared import emulated_mask, native_batch, native_inputs

__all__ = [
    "DEFAULT_IMAGE_MODEL",
    "MAX_INPUT_BYTES_EACH",
    "MAX_INPUT_BYTES_TOTAL",
    "MAX_INPUT_IMAGES",
    "PROVIDER_NAME",
    "app_server_capabilities",
]

PROVIDER_NAME = "codex-app-server"
DEFAULT_IMAGE_MODEL = "gpt-image-2"
MAX_INPUT_IMAGES = 5
MAX_INPUT_BYTES_EACH = 32 * 1024 * 1024
MAX_INPUT_BYTES_TOTAL = 64 * 1024 * 1024


def app_server_capabilities(model: str) -> ProviderCapabilities:
    """The native capability document (count 1; the fan-out decorator widens it)."""
    count, batching = native_batch(1)
    inputs = native_inputs(MAX_INPUT_IMAGES, MAX_INPUT_BYTES_EACH, MAX_INPUT_BYTES_TOTAL)
    return ProviderCapabilities(
        provider=PROVIDER_NAME,
        implementation_version=__version__,
        model=model,
        experimental=False,
        generation=True,
        edits=True,
        count=count,
        batching=batching,
        sizes=SizeCapabilities(auto=True, arbitrary=False),
        aspect_ratio=SupportLevel.UNSUPPORTED,
        resolution=SupportLevel.UNSUPPORTED,
        qualities=[Quality.AUTO],
        output_formats=[OutputFormat.PNG],
        backgrounds=[Background.AUTO],
        transparent_background=SupportLevel.EMULATED,
        moderation=[Moderation.AUTO],
        negative_prompt=SupportLevel.EMULATED,
        revised_prompt=SupportLevel.EMULATED,
        user_attribution=SupportLevel.UNSUPPORTED,
        input_fidelities=[InputFidelity.HIGH],
        actions=[ImageAction.AUTO],
        reference_images=inputs,
        edit_images=inputs.model_copy(),
        masks=emulated_mask(MAX_INPUT_BYTES_EACH),
        partial_images=U8Range(min=0, max=0),
        persistent_sessions=True,
        explicit_threads=True,
    )
