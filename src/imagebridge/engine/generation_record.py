"""The generation record: what made an image, embedded in it or written beside it.

``output.metadata`` asks for it embedded (XMP inside the image's bytes, written before
projection, so the delivered digest covers it) and/or as a ``metadata-<id>.json`` sidecar
beside each stored artifact (written last, once the response's timings are final). Both
name the request's operation without paths or bytes (:func:`operation_summary`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.publishing import (
    ARTIFACT_NOT_STORED,
    SIDECAR_NOT_STORED,
    ArtifactSink,
    is_storage_fault,
)
from imagebridge.engine.verification import VerifiedImage, protocol_error
from imagebridge.imaging.inspect import ImageInfo, ImageLimits
from imagebridge.imaging.metadata import (
    build_generation_record,
    embed_metadata,
    fit_generation_record,
    has_c2pa_manifest,
)

__all__ = [
    "C2PA_WARNING",
    "embed_record",
    "invalidates_c2pa",
    "operation_summary",
    "write_sidecars",
]

C2PA_WARNING = "c2pa_manifest_invalidated"
"""Embedded metadata changed bytes that a C2PA manifest had signed."""


def operation_summary(request: ImageRequest) -> dict[str, Any]:
    """What the request did, without paths or bytes."""
    return {
        "kind": request.operation.value,
        "input_images": len(request.edit_images),
        "reference_images": len(request.reference_images),
        "mask": request.mask is not None,
    }


def invalidates_c2pa(verified: list[VerifiedImage]) -> bool:
    """Whether embedding would break a C2PA manifest's binding: XMP goes into the bytes
    a manifest in any of ``verified`` signed."""
    return any(has_c2pa_manifest(image.data, image.info.format) for image in verified)


async def embed_record(
    image: VerifiedImage,
    response: ImageResponse,
    original: ImageRequest,
    effective: ImageRequest,
    limits: ImageLimits,
) -> None:
    """Embed the generation record as XMP (pixels untouched; bytes and sha256 change)."""
    timings: dict[str, Any] = {
        "queue_ms": response.timings.queue_ms,
        "provider_ms": response.timings.provider_ms,
    }
    if image.generation_ms is not None:
        timings["generation_ms"] = image.generation_ms
    record = build_generation_record(
        request_id=response.id,
        created=response.created,
        operation=operation_summary(original),
        original_prompt=original.prompt,
        effective_prompt=effective.prompt,
        negative_prompt=original.negative_prompt,
        policies=effective.policies.model_dump(mode="json"),
        provider=response.provider,
        model=response.model,
        requested=response.requested.model_dump(mode="json"),
        effective=response.effective.model_dump(mode="json"),
        normalizations=[n.model_dump(mode="json") for n in response.normalizations],
        revised_prompt=response.revised_prompt,
        usage=response.usage.model_dump(mode="json") if response.usage else None,
        session=response.session.model_dump(mode="json") if response.session else None,
        timings=timings,
        warnings=list(response.warnings),
        image={
            "index": image.index,
            "format": image.info.format.value,
            "width": image.info.width,
            "height": image.info.height,
        },
    )

    def embed() -> tuple[bytes, ImageInfo]:
        _, encoded = fit_generation_record(record)
        return embed_metadata(image.data, image.info.format, encoded, limits)

    try:
        image.replace_data(*await asyncio.to_thread(embed))
    except BridgeError as error:
        if error.code is ErrorCode.ARTIFACT:
            raise
        raise BridgeError(
            ErrorCode.ARTIFACT, error.message, details=error.details or None
        ) from error


def _sidecar_common(
    response: ImageResponse, original: ImageRequest, effective: ImageRequest
) -> dict[str, Any]:
    """The part of every sidecar of ``response`` that is not about one image."""
    common: dict[str, Any] = {
        "version": 1,
        "request_id": response.id,
        "created": response.created,
        "operation": operation_summary(original),
        "original_prompt": original.prompt,
        "effective_prompt": effective.prompt,
    }
    if original.negative_prompt is not None:
        common["negative_prompt"] = original.negative_prompt
    common.update(
        {
            "policies": effective.policies.model_dump(mode="json"),
            "provider": response.provider,
            "model": response.model,
            "requested": response.requested.model_dump(mode="json"),
            "effective": response.effective.model_dump(mode="json"),
            "normalizations": [n.model_dump(mode="json") for n in response.normalizations],
        }
    )
    if response.attempts:
        common["attempts"] = [a.model_dump(mode="json") for a in response.attempts]
    for key in ("revised_prompt", "usage", "session"):
        value = getattr(response, key)
        if value is not None:
            common[key] = value if isinstance(value, str) else value.model_dump(mode="json")
    common["timings"] = response.timings.model_dump(mode="json")
    common["warnings"] = list(response.warnings)
    return common


async def write_sidecars(
    sink: ArtifactSink,
    response: ImageResponse,
    original: ImageRequest,
    effective: ImageRequest,
) -> ImageResponse:
    """A copy of ``response`` whose artifacts name the sidecar written beside each; a
    sidecar storage refused leaves its (stored) image delivered, with a warning."""
    common = _sidecar_common(response, original, effective)
    result = response.model_copy(deep=True)
    for item in result.data:
        if item.type == "b64_json" and ARTIFACT_NOT_STORED in result.warnings:
            continue  # delivered inline: storage failed, there is nothing to describe
        if item.type != "artifact" or item.id is None or item.name is None:
            raise protocol_error("metadata sidecars require named artifact outputs")
        image: dict[str, Any] = {
            "index": item.index,
            "artifact_name": item.name,
            "format": item.format.value,
            "width": item.width,
            "height": item.height,
            "bytes": item.bytes,
            "sha256": item.sha256,
        }
        if item.generation_ms is not None:
            image["generation_ms"] = item.generation_ms
        try:
            item.metadata_name = await sink.attach_metadata(
                item.id, item.name, {**common, "image": image}
            )
        except BridgeError as error:
            if not is_storage_fault(error):
                raise
            result.add_warning(SIDECAR_NOT_STORED)  # the image itself is stored
    return result
