"""``stream: true`` on the OpenAI-compatible routes: the OpenAI stream dialect of SSE.

The wire shapes are :mod:`imagebridge.contract.openai.images_stream`'s; this module only decides
which frame each moment of the native lifecycle becomes. There is no ``started`` frame
(OpenAI's streams have none), so the stream defers its start: a failure before the first
partial image (or the first heartbeat) is an ordinary JSON error with its HTTP status and
``x-should-retry``, as OpenAI answers a bad streamed request. Later failures are the SDKs'
``error`` event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.enums import ResponseFormat
from imagebridge.contract.errors import BridgeError, ErrorCode, error_envelope
from imagebridge.contract.events import PartialImageEvent
from imagebridge.contract.openai.images import CompatImagesResponse
from imagebridge.contract.openai.images_stream import (
    StreamKind,
    completed_events,
    partial_image_event,
    stream_error,
)
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.provider import EventSink, ProviderEventT
from imagebridge.server.context import request_context
from imagebridge.server.errors import json_bytes
from imagebridge.server.execution import execute_image
from imagebridge.server.openai.errors import openai_error
from imagebridge.server.openai.previews import PreviewBound
from imagebridge.server.presence import ClientPresence
from imagebridge.server.state import BridgeState
from imagebridge.server.streaming import EndpointStream, EventStreamResponse, sse_frame
from imagebridge.storage.records import JobOrigin

__all__ = ["OPENAI_SSE_EVENT_SCHEMA", "OpenAIStreamDialect", "Routed", "stream_compatible"]

OPENAI_SSE_EVENT_SCHEMA = {
    "description": (
        "With `stream: true`: `image_generation.partial_image` / `image_edit.partial_image` "
        "events, then one `image_generation.completed` / `image_edit.completed` per image, "
        'or an `error` event (`{type: "error", error: {…}}`). Each event\'s `imagegen_bridge.'
        "index` names its image. No `started` or `progress` events."
    ),
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {
            "enum": [
                "image_generation.partial_image",
                "image_generation.completed",
                "image_edit.partial_image",
                "image_edit.completed",
                "error",
            ]
        },
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}

URL_IN_STREAM = (
    "streamed images are sent as base64 (b64_json); response_format url is not "
    "available with stream"
)


class Routed(Protocol):
    """The compatible route's request builder (model routing, idempotency header)."""

    def __call__(self) -> ImageRequest: ...

    def answer(self, response: ImageResponse) -> CompatImagesResponse: ...


class OpenAIStreamDialect:
    """A :class:`~imagebridge.server.streaming.StreamDialect` for OpenAI's image streams."""

    started = None

    def __init__(
        self,
        kind: StreamKind,
        request: ImageRequest,
        answer: Callable[[ImageResponse], CompatImagesResponse],
    ) -> None:
        self._kind = kind
        self._request = request
        self._answer = answer

    def event(self, event: ProviderEventT) -> bytes | None:
        if not isinstance(event, PartialImageEvent):
            return None  # progress has no OpenAI event
        partial = partial_image_event(self._kind, event, self._request)
        return sse_frame(partial.type, partial.to_json())

    def completed(self, response: ImageResponse) -> bytes:
        events = completed_events(self._kind, response, self._answer(response))
        if not events:  # not expected: the engine fails a request that delivers nothing
            raise BridgeError(ErrorCode.PROTOCOL, "no image was delivered")
        return b"".join(sse_frame(event.type, event.to_json()) for event in events)

    def error(self, error: BridgeError, request_id: str) -> bytes:
        return sse_frame("error", json_bytes(stream_error(error_envelope(error, request_id))))


def stream_compatible(
    state: BridgeState,
    request: Request,
    image_request: ImageRequest,
    routed: Routed,
    kind: StreamKind,
) -> Response:
    """Run the request as an OpenAI image stream (``stream: true``).

    Every image of ``n`` goes out: each image's partial images as the provider makes them
    (``imagegen_bridge.index`` says whose), then one completed event per image, in order.
    """
    if image_request.output.response_format is not ResponseFormat.B64_JSON:
        raise BridgeError(
            ErrorCode.UNSUPPORTED_CAPABILITY, URL_IN_STREAM, details={"field": "response_format"}
        )

    previews = PreviewBound(state, routed, "partial_images")
    presence = ClientPresence()

    def answer(response: ImageResponse) -> CompatImagesResponse:
        answered = routed.answer(response)
        if previews.normalization is not None:
            answered.imagegen_bridge.normalizations.insert(0, previews.normalization)
        return answered

    async def operation(sink: EventSink, token: CancelToken) -> ImageResponse:
        await previews.measure()
        try:
            return await execute_image(
                state,
                request,
                previews,
                origin=JobOrigin.OPENAI,
                events=sink,
                presence=presence,
                watch_client=False,
            )
        except BridgeError as error:
            raise openai_error(error) from None

    stream = EventStreamResponse(
        operation,
        request_id=request_context(request).request_id,
        heartbeat_interval=state.heartbeat_interval,
        queue_size=state.options.stream_queue_size,
        dialect=OpenAIStreamDialect(kind, image_request, answer),
        presence=presence,
    )
    return EndpointStream(stream)
