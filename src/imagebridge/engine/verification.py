"""Independent verification of a provider's outputs: nothing it says is trusted.

The output set must be exactly the indices ``0..n-1`` in order; each image's base64 is
decoded (bounded) and its bytes inspected in full, and what the provider declared (format,
dimensions, size, digest) must match what the bytes are. The result is a
:class:`VerifiedImage`, which the later stages (:mod:`.finishing`, :mod:`.generation_record`,
:mod:`.projection`) change only through :meth:`VerifiedImage.replace_data`. The response's
payload is held to a byte budget from the provider's answer to the delivered one.
"""

from __future__ import annotations

import asyncio
import binascii
import itertools
from dataclasses import dataclass, replace
from typing import Any

from imagebridge.contract.enums import MultiImageFailurePolicy
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import GeneratedImage, ImageResponse
from imagebridge.engine.decoded import take_decoded
from imagebridge.imaging.b64 import decode_strict, is_canonical
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, inspect_image

__all__ = [
    "INLINE_BYTES",
    "INLINE_PIXELS",
    "ResponseBudget",
    "VerifiedImage",
    "check_output_set",
    "protocol_error",
    "verification_failure",
    "verify_output",
]

INLINE_BYTES = 256 * 1024
"""Outputs up to this size (encoded) are decoded, verified and re-encoded on the event
loop: for such small images a worker-thread hop costs more CPU and latency than the work."""
INLINE_PIXELS = 256 * 256
"""…and only when the header says at most this many pixels (a small file can still
declare a huge image); anything larger is verified in a worker thread."""


@dataclass(slots=True)
class VerifiedImage:
    """One output after verification, before projection."""

    index: int
    data: bytes
    info: ImageInfo
    generation_ms: int | None
    encoded: str | None = None
    """The provider's base64 of exactly ``data`` (canonical), passed on instead of encoding
    ``data`` again; ``None`` once ``data`` changes or when it was released."""

    def replace_data(self, data: bytes, info: ImageInfo) -> None:
        self.data, self.info, self.encoded = data, info, None


def protocol_error(message: str, **details: Any) -> BridgeError:
    """The provider broke the contract of its answer (the image may still have been made)."""
    return BridgeError(ErrorCode.PROTOCOL, message, details=details)


def verification_failure(error: BridgeError, index: int, stage: str | None = None) -> BridgeError:
    """Re-code an inspection failure, keeping the specific reason (and naming the
    finishing ``stage`` it happened in, unless the failure already names one)."""
    details = dict(error.details)
    details["reason"] = error.message
    details["output_index"] = index
    if stage is not None:
        details.setdefault("stage", stage)
    return BridgeError(
        ErrorCode.ARTIFACT,
        "provider output image failed independent verification",
        details=details,
    )


# -- the output set ------------------------------------------------------------------------


def check_output_set(response: ImageResponse, effective: ImageRequest) -> None:
    """Exactly the outputs ``0..n-1``, images and failures each in index order."""
    n = effective.parameters.n
    if (
        effective.parameters.failure_policy is MultiImageFailurePolicy.FAIL_FAST
        and response.failures
    ):
        raise protocol_error("provider returned partial failures under fail-fast policy")
    actual = len(response.data) + len(response.failures)
    if actual != n:
        raise protocol_error(
            "provider returned a different number of outputs", expected=n, actual=actual
        )
    indices = sorted([i.index for i in response.data] + [f.index for f in response.failures])
    if indices != list(range(n)):
        raise protocol_error("provider returned duplicate or missing output indices")
    for items in ([i.index for i in response.data], [f.index for f in response.failures]):
        if any(later <= earlier for earlier, later in itertools.pairwise(items)):
            raise protocol_error("provider returned outputs in an unstable index order")


class ResponseBudget:
    """The response's payload bytes, counted as they grow, against ``max_response_bytes``.

    It starts from the provider's answer (its texts and payloads), then counts each
    verified image's bytes and each delivered item's payload; crossing the maximum at any
    step refuses the response.
    """

    __slots__ = ("maximum", "total")

    def __init__(self, response: ImageResponse, maximum: int) -> None:
        self.maximum = maximum
        total = len(response.id) + len(response.provider) + len(response.model)
        total += len(response.revised_prompt or "") + sum(len(w) for w in response.warnings)
        total += sum(self.payload_size(item) for item in response.data)
        self.total = 0
        self.add(total)

    @staticmethod
    def payload_size(item: GeneratedImage) -> int:
        if item.b64_json is not None:
            return len(item.b64_json)
        if item.url is not None:
            return len(item.url)
        return len(item.id or "") + len(item.name or "")

    def add(self, size: int) -> None:
        self.total += size
        if self.total > self.maximum:
            raise protocol_error(
                "aggregate response payload exceeds the configured byte limit",
                maximum_bytes=self.maximum,
            )


# -- each image ----------------------------------------------------------------------------


def _decode_boxed(box: list[str]) -> bytes:
    """Decode the base64 text in ``box`` (a worker thread's argument).

    The executor's work item (and so its arguments) can outlive the ``await`` for a moment
    on a busy machine; passing the text itself would keep it alive after ``box`` released
    it for the pixels' sake (:func:`_inspect`).
    """
    return decode_strict(box[0])


async def verify_output(
    item: GeneratedImage, *, max_base64_chars: int, limits: ImageLimits
) -> VerifiedImage:
    """``item``'s bytes, decoded and inspected under ``limits``; its base64 is released
    from ``item`` (and passed on in the result while the bytes stay as they are)."""
    if item.type == "url":
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "provider returned a URL output but remote output fetching is not configured",
        )
    if item.type != "b64_json" or item.b64_json is None:
        raise protocol_error("provider returned an unverifiable internal payload type")
    if len(item.b64_json) > max_base64_chars:
        raise protocol_error(
            "provider base64 output exceeds the configured limit",
            maximum_bytes=max_base64_chars,
        )
    decoded = take_decoded(item)
    # The provider's text, kept to be passed on unless the pixels need the memory:
    # ``text[0]`` is its only reference from here on (bench/memory.py).
    text = [item.b64_json.strip()]
    item.b64_json = None
    if decoded is not None:
        # The provider decoded this payload and computed its facts over exactly these
        # bytes: no second base64 decode and hash of the same payload.
        data = decoded.data
    else:
        try:
            if len(text[0]) <= INLINE_BYTES * 4 // 3:
                data = decode_strict(text[0])
            else:
                data = await asyncio.to_thread(_decode_boxed, text)
        except (binascii.Error, ValueError):
            raise protocol_error("provider returned malformed base64 image data") from None
    try:
        if decoded is not None and decoded.verified_under == limits:
            info = decoded.info  # fully decoded under these very limits, in this process
        else:
            info = await _inspect(data, decoded.info.sha256 if decoded else None, text, limits)
    except BridgeError as error:
        raise verification_failure(error, item.index) from None
    declared = (item.format, item.width, item.height, item.bytes, item.sha256)
    actual = (info.format, info.width, info.height, info.bytes, info.sha256)
    if declared != actual:
        raise protocol_error(
            "provider output metadata does not match the decoded image",
            output_index=item.index,
        )
    encoded = text[0] if text and is_canonical(text[0]) else None
    return VerifiedImage(item.index, data, info, item.generation_ms, encoded)


async def _inspect(
    data: bytes, sha256: str | None, text: list[str], limits: ImageLimits
) -> ImageInfo:
    """Full verification: on the loop for a small image, else in a worker thread.

    ``text`` (the payload's base64) is emptied if the check needs a pixel buffer: a
    large image's base64 (1.33x its size) is not held alongside its pixels
    (bench/memory.py). A plain PNG's check needs none, and its text is passed on.
    """
    if len(data) <= INLINE_BYTES:
        small = replace(limits, max_pixels=min(limits.max_pixels, INLINE_PIXELS))
        try:
            return inspect_image(data, small, sha256=sha256)
        except BridgeError:
            pass  # more pixels than the loop should decode, or invalid: the full check
    return await asyncio.to_thread(
        inspect_image, data, limits, sha256=sha256, before_pixel_buffer=text.clear
    )
