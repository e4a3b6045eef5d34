"""``stream: true`` on ``POST /v1/responses``: OpenAI's Responses dialect of the one SSE
lifecycle (:mod:`imagebridge.server.streaming`).

The events and their order are :mod:`imagebridge.contract.openai.responses_stream`'s; this
module decides which moment of the native lifecycle each becomes: a provider's progress
report is ``response.image_generation_call.generating``, its preview a
``…partial_image``, the finished image the call's completion, the assistant message and
``response.completed``. Like the Images API's stream, the response starts with its first
event or its first heartbeat (``: heartbeat`` comments while idle), so a failure found
before either (a bad request, routing, negotiation, admission, a quick provider refusal)
is an ordinary JSON error with its status and ``x-should-retry``. A failure after that is
``response.failed`` carrying the response with its ``error``, the one terminal event.

``partial_images`` is an upper bound at OpenAI: a provider making fewer previews runs with
its maximum, and the answer says so in a ``tools[i].partial_images`` normalization; a
preview beyond the bound (a backend may send some unasked) is not sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import Response

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.events import PartialImageEvent, ProgressEvent
from imagebridge.contract.openai.responses_output import ResponseObject
from imagebridge.contract.openai.responses_stream import ResponseEvent, ResponseEvents
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse, Normalization
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.provider import EventSink, ProviderEventT
from imagebridge.server.context import request_context
from imagebridge.server.execution import execute_image
from imagebridge.server.openai.errors import openai_error
from imagebridge.server.presence import ClientPresence
from imagebridge.server.streaming import EndpointStream, EventStreamResponse, sse_frame
from imagebridge.storage.records import JobOrigin

if TYPE_CHECKING:
    from imagebridge.server.openai.responses import ResponseRun

__all__ = ["RESPONSES_SSE_EVENT_SCHEMA", "ResponsesStreamDialect", "stream_response"]

RESPONSES_SSE_EVENT_SCHEMA = {
    "description": (
        "With `stream: true`: OpenAI's Responses events, each with `sequence_number`: "
        "`response.created`, `response.in_progress`, `response.output_item.added`, "
        "`response.image_generation_call.in_progress|generating|partial_image|completed`, "
        "`response.output_item.done`, the assistant message's `response.output_item.added`, "
        "`response.content_part.added`, `response.output_text.delta|done`, "
        "`response.content_part.done`, `response.output_item.done`, then "
        "`response.completed`, or `response.failed` once a failure ends the stream."
    ),
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string"},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}


def _frames(events: list[ResponseEvent]) -> bytes:
    return b"".join(sse_frame(event.type, event.to_json()) for event in events)


class ResponsesStreamDialect:
    """A :class:`~imagebridge.server.streaming.StreamDialect` for Responses streams."""

    started = None

    def __init__(self, run: ResponseRun, previews: _PreviewBound) -> None:
        self._run = run
        self._previews = previews
        self._events: ResponseEvents | None = None

    def _stream(self) -> ResponseEvents:
        if self._events is None:  # the model is known once the request is routed
            self._events = ResponseEvents(self._run.translation, self._run.ids, self._run.model)
        return self._events

    def event(self, event: ProviderEventT) -> bytes | None:
        if isinstance(event, PartialImageEvent):
            if event.partial_index >= self._previews.allowed:
                return None  # more previews than asked for (a backend may send them anyway)
            return _frames(self._stream().partial_image(event.b64_json, event.partial_index))
        if isinstance(event, ProgressEvent):
            return _frames(self._stream().generating()) or None
        return None

    def completed(self, response: ImageResponse) -> bytes:
        answer = self._run.finished(response)
        if self._previews.normalization is not None:
            answer.imagegen_bridge.normalizations.insert(0, self._previews.normalization)
        return _frames(self._stream().completed(answer))

    def error(self, error: BridgeError, request_id: str) -> bytes:
        failed: ResponseObject = self._run.failed(error)
        return _frames(self._stream().failed(failed))


class _PreviewBound:
    """Runs ``partial_images`` at most at the routed provider's maximum (see above)."""

    def __init__(self, run: ResponseRun) -> None:
        self._run = run
        self._maximum: int | None = None
        self.normalization: Normalization | None = None
        self.allowed = run.translation.request.parameters.partial_images
        """The previews the stream sends at most: the asked number, or the clamped one."""

    async def measure(self) -> None:
        """The routed provider's preview bound (a failure here is the build's to report)."""
        try:
            routed = self._run()
            capabilities = await self._run.state.runtime.registry.capabilities(
                routed.routing.provider, routed.routing.model
            )
        except BridgeError:
            return
        self._maximum = capabilities.partial_images.max

    def __call__(self) -> ImageRequest:
        built = self._run()
        asked = built.parameters.partial_images
        if self._maximum is None or asked <= self._maximum:
            return built
        self.normalization = Normalization(
            field=f"{self._run.translation.tool_param}.partial_images",
            requested=asked,
            effective=self._maximum,
            reason="clamped_to_provider_range",
        )
        self.allowed = self._maximum
        parameters = built.parameters.model_copy(update={"partial_images": self._maximum})
        return built.model_copy(update={"parameters": parameters})


def stream_response(run: ResponseRun) -> Response:
    """Run the response as OpenAI's Responses event stream."""
    state, request = run.state, run.request
    previews = _PreviewBound(run)
    presence = ClientPresence()

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
            raise openai_error(error, run.translation.param) from None

    stream = EventStreamResponse(
        operation,
        request_id=request_context(request).request_id,
        heartbeat_interval=state.heartbeat_interval,
        queue_size=state.options.stream_queue_size,
        dialect=ResponsesStreamDialect(run, previews),
        presence=presence,
    )
    return EndpointStream(stream)
