"""The answer of one OpenAI Images call: its images verified, as an :class:`ImageResponse`.

An image comes as ``b64_json``, a ``data:`` URL, or an ``http(s)`` URL fetched only when
``[artifacts.remote_output]`` enabled an output fetcher. Every image is inspected before it
is reported; whatever goes wrong once the upstream answered is an ``unknown`` outcome (the
generation may have been billed).
"""

from __future__ import annotations

import asyncio
import binascii
import functools
import time
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

from imagebridge.contract.enums import MultiImageFailurePolicy
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import (
    BridgeErrorBody,
    GeneratedImage,
    ImageFailure,
    ImageResponse,
    Timings,
    Usage,
)
from imagebridge.engine.decoded import DecodedPayload
from imagebridge.engine.inputs import LoadedImage
from imagebridge.engine.provider import inline_image
from imagebridge.imaging.b64 import decode_strict, encode_text
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, examine_image
from imagebridge.providers.openai import json_body
from imagebridge.providers.openai.wire import (
    WireImage,
    WireResult,
    merge_usage,
    parse_images_payload,
)

__all__ = [
    "EARLY_VERIFY_MAX_PIXELS",
    "Answer",
    "OutputFetcher",
    "ResultReader",
    "read_answer",
    "start_reading",
    "unusable_answer",
]

_Checked = tuple[bytes, tuple[ImageInfo, bool]]
"""A ``b64_json`` image's bytes and what :func:`examine_image` proved about them."""
_Outcome: TypeAlias = "_Checked | ValueError | _Unverified"
"""A check already run: what it proved, or the failure it raised."""


@dataclass(slots=True)
class Answer:
    """One call's answer as read: its images, and the check of a lone ``b64_json`` image
    when :func:`read_answer` already ran it (its outcome, or the failure it raised)."""

    result: WireResult
    lone_check: _Outcome | None = field(default=None, repr=False)


def start_reading(
    box: list[bytes | bytearray], limits: ImageLimits, *, max_base64_chars: int
) -> asyncio.Future[Answer]:
    """The answer whose JSON body is in ``box``, read by :func:`read_answer` in a worker
    thread that starts now; awaited later by whoever needs it."""
    job = functools.partial(read_answer, box, limits, max_base64_chars=max_base64_chars)
    future = asyncio.get_running_loop().run_in_executor(None, job)
    future.add_done_callback(_retrieved)  # a call given up on: its failure is not logged
    return future


def _retrieved(future: asyncio.Future[Answer]) -> None:
    if not future.cancelled():
        future.exception()


def read_answer(
    box: list[bytes | bytearray], limits: ImageLimits, *, max_base64_chars: int
) -> Answer:
    """Worker thread: parse the JSON body in ``box`` (taken out, so its buffer is freed
    before any image is decoded) and, when it holds one ``b64_json`` image, check it too.

    JSON errors raise ``ValueError``/``RecursionError``, a malformed payload ``BridgeError``.
    Checking a lone image in the parse's own thread starts it as soon as this call's body
    is in. In a fan-out of one-image calls the event loop is busy receiving the other
    answers, and each hop back to it (parse done, exchange done, check started) waited for
    a loop pass: bench/gateway.py's fan-out saw 34 ms from the first body to the first
    check. Several images keep a thread each (:meth:`ResultReader.response`).
    """
    result = parse_images_payload(json_body.loads(box.pop()), max_base64_chars=max_base64_chars)
    answer = Answer(result)
    if len(result.images) == 1 and (payload := result.images[0].b64_json) is not None:
        try:
            answer.lone_check = _decode_and_examine(payload, limits)
        except (ValueError, _Unverified) as failure:
            answer.lone_check = failure
    return answer


class OutputFetcher(Protocol):
    """Fetches an image URL from an answer under the ``[artifacts.remote_output]`` policy."""

    @property
    def enabled(self) -> bool: ...

    async def fetch(self, url: str) -> LoadedImage: ...


def unusable_answer(provider: str, message: str) -> BridgeError:
    """An answer that arrived but cannot be used: the generation may have happened."""
    return BridgeError(
        ErrorCode.PROTOCOL, message, provider=provider, details={"stage": "response"}
    ).mark_unknown_outcome()


class ResultReader:
    """Turns one call's :class:`WireResult` into a verified response of ``provider``."""

    def __init__(
        self, provider: str, limits: ImageLimits, output_fetcher: OutputFetcher | None
    ) -> None:
        self.provider = provider
        self.limits = limits
        self.output_fetcher = output_fetcher

    def _unusable(self, message: str) -> BridgeError:
        return unusable_answer(self.provider, message)

    async def _image_bytes(self, image: WireImage) -> bytes:
        if image.b64_json is not None:
            return await asyncio.to_thread(_b64decode, image.b64_json)
        assert image.url is not None
        if image.url.startswith("data:"):
            _, comma, payload = image.url.partition(",")
            if not comma or ";base64" not in image.url[: image.url.find(",")]:
                raise self._unusable("the upstream returned a malformed data URL")
            return await asyncio.to_thread(_b64decode, payload)
        if self.output_fetcher is None or not self.output_fetcher.enabled:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "the upstream returned an image URL but artifacts.remote_output is disabled",
                provider=self.provider,
            ).mark_unknown_outcome()
        try:
            fetched = await self.output_fetcher.fetch(image.url)
        except BridgeError as error:
            raise BridgeError(
                ErrorCode.UPSTREAM,
                "the upstream image URL could not be fetched",
                provider=self.provider,
                details={"reason": error.message},
            ).mark_unknown_outcome() from None
        return fetched.data

    async def _verified(
        self, index: int, image: WireImage, checked: _Outcome | None
    ) -> GeneratedImage:
        limits = self.limits
        try:
            if isinstance(checked, Exception):
                raise checked
            if checked is not None:
                data, (info, verified) = checked
            elif image.b64_json is not None:  # decoded and examined in one worker-thread hop
                data, (info, verified) = await asyncio.to_thread(
                    _decode_and_examine, image.b64_json, limits
                )
            else:
                data = await self._image_bytes(image)
                info, verified = await asyncio.to_thread(_examined, data, limits)
        except ValueError:
            raise self._unusable("the upstream returned malformed base64 image data") from None
        except _Unverified as failure:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "the upstream returned an image that failed verification",
                provider=self.provider,
                details={"reason": failure.error.message, "output_index": index},
            ).mark_unknown_outcome() from None
        encoded = image.b64_json if image.b64_json is not None else None
        if encoded is None:
            encoded = await asyncio.to_thread(encode_text, data)
        decoded = DecodedPayload(data, info, verified_under=limits if verified else None)
        return inline_image(index, encoded, info, decoded=decoded)

    async def response(
        self,
        request: ImageRequest,
        model: str,
        answer: Answer,
        request_id: str,
        started: float,
    ) -> ImageResponse:
        params = request.parameters
        n = params.n
        result = answer.result
        if len(result.images) > n:
            raise self._unusable("the upstream returned more images than requested")
        if answer.lone_check is not None:
            images = [await self._verified(0, result.images[0], answer.lone_check)]
        else:
            images = list(
                await asyncio.gather(
                    *(
                        self._verified(index, image, None)
                        for index, image in enumerate(result.images)
                    )
                )
            )
        failures: list[ImageFailure] = []
        elapsed = int((time.monotonic() - started) * 1000)
        if len(images) < n:
            missing = BridgeError(
                ErrorCode.UPSTREAM,
                "the upstream returned fewer images than requested",
                provider=self.provider,
                details={"expected": n, "actual": len(images)},
            )
            if params.failure_policy is not MultiImageFailurePolicy.BEST_EFFORT or not images:
                raise missing.mark_unknown_outcome()
            for index in range(len(images), n):
                failures.append(
                    ImageFailure(
                        index=index,
                        error=BridgeErrorBody.from_error(
                            missing.copy().with_detail("output_index", index)
                        ),
                        generation_ms=elapsed,
                    )
                )
        revised = next((i.revised_prompt for i in result.images if i.revised_prompt), None)
        usage = merge_usage(result.usage, Usage(provider={"images": len(images)}))
        return ImageResponse(
            id=request_id,
            created=int(time.time()),
            provider=self.provider,
            model=model,
            requested=params.model_copy(deep=True),
            effective=params.model_copy(deep=True),
            data=images,
            failures=failures,
            revised_prompt=revised,
            usage=usage,
            timings=Timings(provider_ms=elapsed, total_ms=elapsed),
        )


EARLY_VERIFY_MAX_PIXELS = 2048 * 2048
"""Outputs whose verification needs a pixel buffer are fully decoded here up to this size.

The full verification (the largest cost of an image) runs here, in a worker thread as
soon as this call's answer arrived, and the materializer reuses it: in a fan-out the
checks overlap the calls still receiving instead of all starting after the slowest call.
A plain PNG is checked scanline by scanline without a pixel buffer, at any size. Other
images need Pillow's pixels, and here the upstream's base64 text is still alive: for a
large image the text beside the bytes and the pixels would exceed the memory bound
(bench/memory.py: 4x the encoded size per in-flight 4096² image), so those are decoded by
the materializer after it released the text.
"""


class _Unverified(Exception):
    """An output's bytes failed :func:`examine_image` (kept apart from transport errors)."""

    def __init__(self, error: BridgeError) -> None:
        super().__init__(error.message)
        self.error = error


def _examined(data: bytes, limits: ImageLimits) -> tuple[ImageInfo, bool]:
    try:
        return examine_image(data, limits, max_decoded_pixels=EARLY_VERIFY_MAX_PIXELS)
    except BridgeError as error:
        raise _Unverified(error) from None


def _decode_and_examine(payload: str, limits: ImageLimits) -> tuple[bytes, tuple[ImageInfo, bool]]:
    """Worker thread: the bytes of ``payload`` (``ValueError`` if it is not base64) and
    what :func:`examine_image` proved about them (``_Unverified`` if they fail)."""
    data = _b64decode(payload)
    return data, _examined(data, limits)


def _b64decode(payload: str) -> bytes:
    try:
        return decode_strict(payload.strip())
    except (binascii.Error, ValueError) as exc:
        raise ValueError("malformed base64") from exc
