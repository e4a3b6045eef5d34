"""A finished record's images, answered again in the format a joining retry asked for.

A retry that joined a generation which ran elsewhere (another instance, or before this
process started) is answered from the record: its result holds each image as the artifact
it was kept as, so the answer is rebuilt in the caller's ``response_format`` — ``artifact``
as stored, ``b64_json`` from the verified bytes (read back under the caller's ownership),
``url`` as a fresh signed link, ``metadata`` without payload. Everything else (``id``,
``created``, provider, parameters, normalizations, timings) is the first answer's, as the
original's replays were. The retry's answer is marked ``x-imagebridge-replay: true``.
"""

from __future__ import annotations

import asyncio

from imagebridge.contract.enums import ResponseFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.response import GeneratedImage, ImageResponse
from imagebridge.engine.publishing import PublishedArtifact
from imagebridge.engine.verification import INLINE_BYTES
from imagebridge.imaging.b64 import encode_text
from imagebridge.server.state import BridgeState
from imagebridge.storage.records import JobRecord

__all__ = ["REPLAY_HEADER", "replayed_response"]

REPLAY_HEADER = (b"x-imagebridge-replay", b"true")
"""Marks an answer given to a retry that joined an earlier generation (no new one ran)."""


def _stored_result(record: JobRecord) -> ImageResponse:
    body = record.response()
    if body is None:
        raise BridgeError(ErrorCode.INTERNAL, "the finished request it repeats has no result")
    return ImageResponse.model_validate(body)


def _not_kept(index: int) -> BridgeError:
    return BridgeError(
        ErrorCode.ARTIFACT,
        "the generation this request repeats finished, but its image was not kept",
        details={"index": index, "reason": "not_kept"},
    ).mark_unknown_outcome()


async def _as_asked(
    state: BridgeState,
    item: GeneratedImage,
    asked: ResponseFormat,
    owner: str,
    link_base: str | None,
) -> GeneratedImage:
    common = item.model_dump(
        include={"index", "format", "width", "height", "bytes", "sha256", "generation_ms"},
        exclude_none=True,
    )
    if asked is ResponseFormat.METADATA:
        return GeneratedImage(type="metadata", **common)
    if item.type != "artifact" or item.id is None:
        raise _not_kept(item.index)
    if asked is ResponseFormat.ARTIFACT:
        return item
    if asked is ResponseFormat.URL:
        materializer = state.runtime.materializer
        base, links = materializer.url_base(link_base), materializer.links
        if base is None or links is None:
            raise BridgeError(ErrorCode.CONFIGURATION, "artifact links are not configured")
        link = await links.link(PublishedArtifact(item.id, item.name or ""))
        url = link if link.startswith(("https://", "http://")) else base + link
        return GeneratedImage(type="url", url=url, **common)
    try:
        content = await state.application.artifacts.read(item.id, owner)
    except BridgeError as error:
        if error.retryable:
            raise
        raise _not_kept(item.index) from None
    data = content.data
    encoded = (
        encode_text(data)
        if len(data) <= INLINE_BYTES
        else await asyncio.to_thread(encode_text, data)
    )
    return GeneratedImage(type="b64_json", b64_json=encoded, **common)


async def replayed_response(
    state: BridgeState,
    record: JobRecord,
    asked: ResponseFormat,
    *,
    link_base: str | None,
) -> ImageResponse:
    """``record``'s result as an answer in ``asked`` (its images read back as needed)."""
    result = await asyncio.to_thread(_stored_result, record)
    owner = record.auth_scope
    data = [await _as_asked(state, item, asked, owner, link_base) for item in result.data]
    return result.model_copy(update={"data": data})
