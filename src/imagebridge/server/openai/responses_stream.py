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

:func:`resume_stream` is ``GET /v1/responses/{id}?stream=true&starting_after=N``: a kept
response's events regenerated from its history record (:func:`record_events`, the same
numbering on every instance), those after ``N`` sent, then the record followed until it
ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.responses import Response, StreamingResponse

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.events import PartialImageEvent, ProgressEvent
from imagebridge.contract.openai.responses_output import ResponseObject
from imagebridge.contract.openai.responses_stream import ResponseEvent, ResponseEvents
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.provider import EventSink, ProviderEventT
from imagebridge.server.context import request_context
from imagebridge.server.execution import execute_image
from imagebridge.server.openai.errors import openai_error
from imagebridge.server.openai.previews import PreviewBound
from imagebridge.server.openai.responses_kept import (
    KeptResponse,
    ids_of,
    kept_response,
    services,
)
from imagebridge.server.presence import ClientPresence
from imagebridge.server.state import BridgeState
from imagebridge.server.streaming import (
    HEARTBEAT,
    EndpointStream,
    EventStreamResponse,
    sse_frame,
)
from imagebridge.storage.records import JobOrigin

if TYPE_CHECKING:
    from imagebridge.server.openai.responses import ResponseRun

__all__ = [
    "RESPONSES_SSE_EVENT_SCHEMA",
    "ResponsesStreamDialect",
    "record_events",
    "resume_stream",
    "stream_response",
]

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

    def __init__(self, run: ResponseRun, previews: PreviewBound) -> None:
        self._run = run
        self._previews = previews
        self._events: ResponseEvents | None = None

    def _stream(self) -> ResponseEvents:
        if self._events is None:  # the model is known once the request is routed
            self._events = ResponseEvents(self._run.shape, self._run.ids, self._run.model)
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
        return _frames(self._stream().completed(self._run.finished(response)))

    def error(self, error: BridgeError, request_id: str) -> bytes:
        failed: ResponseObject = self._run.failed(error)
        return _frames(self._stream().failed(failed))


def stream_response(run: ResponseRun) -> Response:
    """Run the response as OpenAI's Responses event stream."""
    state, request = run.state, run.request
    previews = PreviewBound(run.state, run, f"{run.translation.tool_param}.partial_images")
    presence = ClientPresence()

    async def operation(sink: EventSink, token: CancelToken) -> ImageResponse:
        await previews.measure()
        try:
            response = await execute_image(
                state,
                request,
                previews,
                origin=JobOrigin.OPENAI,
                events=sink,
                presence=presence,
                watch_client=False,
            )
        except BridgeError as error:
            await run.keep(adopt=False)
            raise openai_error(error, run.translation.param) from None
        if previews.normalization is not None:
            run.extra = [previews.normalization]
        await run.keep(adopt=False)
        return response

    stream = EventStreamResponse(
        operation,
        request_id=request_context(request).request_id,
        heartbeat_interval=state.heartbeat_interval,
        queue_size=state.options.stream_queue_size,
        dialect=ResponsesStreamDialect(run, previews),
        presence=presence,
    )
    return EndpointStream(stream)


# -- resuming a kept response --------------------------------------------------------------


async def record_events(state: BridgeState, found: KeptResponse) -> list[ResponseEvent]:
    """A kept response's events as its record stands: a deterministic function of the
    record (the opening four; ``generating`` once its work started; the completion's or
    the failure's events once it ended), so every instance numbers them alike. Previews
    are not kept, so a resumed stream has none."""
    kept, record = found.kept, found.record
    model = record.provider or state.runtime.registry.default
    events = ResponseEvents(
        found.shape, ids_of(kept), model, status="queued" if kept.background else "in_progress"
    )
    made = events.opening()
    if record.started_at is not None:
        made.extend(events.generating())
    if record.terminal:
        answer: ResponseObject = await kept_response(state, found)
        if record.status is ImageJobStatus.SUCCEEDED:
            made.extend(events.completed(answer))
        else:
            made.extend(events.failed(answer))
    return made


async def _followed(
    state: BridgeState, found: KeptResponse, starting_after: int
) -> AsyncIterator[bytes]:
    settings = state.config.server.openai.responses
    jobs = services(state)
    assert jobs is not None
    sent = starting_after
    heartbeat = state.heartbeat_interval
    quiet_since = time.monotonic()
    ends = time.monotonic() + settings.max_stream_follow_secs
    while True:
        fresh = [e for e in await record_events(state, found) if e.sequence_number > sent]
        if fresh:
            sent = fresh[-1].sequence_number
            quiet_since = time.monotonic()
            yield _frames(fresh)
        if found.record.terminal or time.monotonic() >= ends:
            return
        await asyncio.sleep(settings.stream_poll_ms / 1000)
        if time.monotonic() - quiet_since >= heartbeat:
            quiet_since = time.monotonic()
            yield HEARTBEAT
        try:
            record = await jobs.job_store.get(found.record.auth_scope, found.record.id)
        except BridgeError as error:
            if not error.retryable:
                raise
            continue  # the database is away for a moment: read again at the next poll
        found = KeptResponse(found.kept, record)


def resume_stream(
    state: BridgeState, found: KeptResponse, *, starting_after: int | None
) -> Response:
    """The kept response's events after ``starting_after`` (all of them without it), then
    the record followed (every ``stream_poll_ms``) until the response ends. The stream ends
    with its client: Starlette stops it when the client disconnects."""
    return StreamingResponse(
        _followed(state, found, -1 if starting_after is None else starting_after),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )
