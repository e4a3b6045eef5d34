"""What a synchronous request's history record holds: its request, and its images as kept.

Blocking, plain functions (run them off the event loop when a request carries large inline
images):

* :func:`record_request` is the request as stored: no idempotency key (as for jobs) and no
  inline input bytes. An edit's source images can be tens of megabytes of base64 that were
  the caller's to begin with; the record keeps each input's kind, media type and file name
  with an empty payload, so the stored request still reads as an ``ImageRequest``. File
  and URL inputs are kept as they were.
* :func:`request_identity` is the request's fingerprint (what a retry must repeat exactly),
  taken over the full request, inline images included.
* :func:`kept_result` is the record's result: the answer with each image as the artifact it
  was kept as (``type: "artifact"``), whatever the caller asked for, so the history shows
  it and a retry is answered from it. An image whose kept copy could not be stored is
  recorded as ``metadata`` (its measured facts, no payload).
"""

from __future__ import annotations

from typing import Any

from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import GeneratedImage, ImageResponse
from imagebridge.engine.idempotency import request_fingerprint
from imagebridge.engine.keep import KeptImages

__all__ = ["INLINE_INPUTS", "kept_result", "record_request", "request_identity"]

INLINE_INPUTS = frozenset({"base64", "data_url"})
"""Input kinds whose payload is the image itself: left out of a record."""

_PAYLOAD_KEYS = ("data", "data_url")


def _without_payload(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") not in INLINE_INPUTS:
        return item
    return {key: ("" if key in _PAYLOAD_KEYS else value) for key, value in item.items()}


def record_request(request: ImageRequest) -> dict[str, Any]:
    """The request as its record stores it (no key, no inline image bytes)."""
    wire = request.to_wire()
    wire.pop("idempotency_key", None)
    for name in ("images", "reference_images"):
        items = wire.get(name)
        if isinstance(items, list):
            wire[name] = [_without_payload(item) for item in items]
    mask = wire.get("mask")
    if isinstance(mask, dict):
        wire["mask"] = _without_payload(mask)
    return wire


def request_identity(request: ImageRequest) -> str:
    """The request's fingerprint: SHA-256 of its canonical JSON without key and timeout."""
    return request_fingerprint(request)


def _kept_item(item: GeneratedImage, kept: KeptImages | None) -> GeneratedImage:
    if item.type == "artifact":
        return item  # delivered as an artifact: that is the kept copy
    artifact = kept.artifact(item.index) if kept is not None else None
    common = item.model_dump(include={"index", "format", "width", "height", "bytes", "sha256"})
    if item.generation_ms is not None:
        common["generation_ms"] = item.generation_ms
    if artifact is None:
        return GeneratedImage(type="metadata", **common)
    return GeneratedImage(type="artifact", id=artifact.id, name=artifact.name, **common)


def kept_result(response: ImageResponse, kept: KeptImages | None) -> ImageResponse:
    """The record's result: ``response`` with every image as the artifact it was kept as."""
    data = [_kept_item(item, kept) for item in response.data]
    return response.model_copy(update={"data": data})
