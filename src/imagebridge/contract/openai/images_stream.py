"""OpenAI's image stream events, made from the native events and response.

The one place the OpenAI stream dialect is spoken (the request side and the JSON answer
live in :mod:`imagebridge.contract.openai.images`): a native ``partial_image`` becomes
``image_generation.partial_image`` / ``image_edit.partial_image``, a native response one
``….completed`` event per image. OpenAI's events carry no image index, so each event has
an ``imagegen_bridge`` object (where OpenAI's decoders do not look) with ``index``; the
completed events also carry the JSON answer's extension (provider, model, warnings …).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from imagebridge.contract._base import U8, U64, ContractModel, StrictStr
from imagebridge.contract.enums import Background, OutputFormat, Quality
from imagebridge.contract.events import PartialImageEvent
from imagebridge.contract.openai.images import (
    CompatImagesResponse,
    CompatResponseExtension,
    CompatTokenDetails,
    CompatUsage,
)
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse

__all__ = [
    "CompatCompletedEvent",
    "CompatPartialImageEvent",
    "CompatStreamIndex",
    "StreamKind",
    "completed_events",
    "partial_image_event",
    "stream_error",
]

StreamKind = Literal["image_generation", "image_edit"]
OpenAIQualityLevel = Literal["low", "medium", "high", "auto"]


class CompatStreamIndex(ContractModel):
    """Which of the request's images a partial image belongs to (0-based)."""

    index: U8


class CompatPartialImageEvent(ContractModel):
    """``image_generation.partial_image`` / ``image_edit.partial_image``: the request's
    settings (the image is not finished, so nothing effective is known yet)."""

    type: StrictStr
    b64_json: StrictStr
    partial_image_index: U8
    size: StrictStr
    quality: Quality
    background: Background
    output_format: OutputFormat
    created_at: U64
    imagegen_bridge: CompatStreamIndex


class CompatCompletedExtension(CompatResponseExtension):
    """The JSON answer's ``imagegen_bridge``, plus this image's ``index``."""

    index: U8


class CompatCompletedEvent(ContractModel):
    """``image_generation.completed`` / ``image_edit.completed``: one finished image."""

    type: StrictStr
    b64_json: StrictStr
    size: StrictStr
    quality: OpenAIQualityLevel
    background: Literal["transparent", "opaque", "auto"]
    output_format: OutputFormat
    created_at: U64
    usage: CompatUsage
    imagegen_bridge: CompatCompletedExtension


def _now() -> int:
    return int(time.time())


def partial_image_event(
    kind: StreamKind, event: PartialImageEvent, request: ImageRequest
) -> CompatPartialImageEvent:
    parameters = request.parameters
    return CompatPartialImageEvent(
        type=f"{kind}.partial_image",
        b64_json=event.b64_json,
        partial_image_index=event.partial_index,
        size=parameters.size,
        quality=parameters.quality,
        background=parameters.background,
        output_format=parameters.output_format,
        created_at=_now(),
        imagegen_bridge=CompatStreamIndex(index=event.index),
    )


_NO_TOKENS = CompatTokenDetails(text_tokens=0, image_tokens=0)
NO_USAGE = CompatUsage(
    input_tokens=0,
    input_tokens_details=_NO_TOKENS,
    output_tokens=0,
    output_tokens_details=_NO_TOKENS,
    total_tokens=0,
)
"""A completed event's usage when the provider reported none (OpenAI's field is required)."""


def completed_events(
    kind: StreamKind, response: ImageResponse, answer: CompatImagesResponse
) -> list[CompatCompletedEvent]:
    """One event per delivered image, in index order; ``answer`` is the JSON answer made
    from ``response`` (so both dialects report the same settings, usage and warnings).

    ``usage`` is the whole request's, repeated on each event: add it up once, not per event.
    """
    created = _now()
    usage = answer.usage or NO_USAGE
    shared = answer.imagegen_bridge
    extension = {name: getattr(shared, name) for name in CompatResponseExtension.model_fields}
    events = []
    for item in response.data:
        if item.b64_json is None:
            continue  # only base64 delivery is streamed (see the route's checks)
        events.append(
            CompatCompletedEvent(
                type=f"{kind}.completed",
                b64_json=item.b64_json,
                size=f"{item.width}x{item.height}",
                quality=answer.quality or "auto",
                background=answer.background or "auto",
                output_format=item.format,
                created_at=created,
                usage=usage,
                imagegen_bridge=CompatCompletedExtension(**extension, index=item.index),
            )
        )
    return events


def stream_error(envelope: dict[str, Any]) -> dict[str, Any]:
    """The SDKs' ``error`` event: ``{"type": "error", "error": {…}}`` (the envelope's body)."""
    return {"type": "error", **envelope}
