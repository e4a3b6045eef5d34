"""The SSE lifecycle of one operation, as a pure ASGI response.

Provider events pass through a small bounded queue, so a slow reader slows the provider
instead of growing memory; exactly one terminal answer (``completed`` or ``error``) ends
the stream. Idle streams carry a ``: heartbeat`` comment (every ``server.stream_heartbeat_ms``
of idleness) so proxies keep them open. When the client goes away its
:class:`~imagebridge.server.presence.ClientPresence` decides: before a provider call, or
under ``on_disconnect: cancel``, the operation's cancel token fires and upstream work stops;
once a provider call began under ``keep`` the work goes on into the history. Either way
the stream waits for the runtime to settle, so no work outlives the request unobserved
(and the server's drain counts it).

What goes on the wire is a :class:`StreamDialect`'s: the native one (:data:`NATIVE`)
sends ``started`` at once and every event as the contract defines it. A dialect without a
``started`` frame (OpenAI's) defers the response's start until its first frame or first
heartbeat, so a failure before either (validation, negotiation, an early provider
refusal) is an ordinary JSON error answer with its HTTP status and retry headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from imagebridge.contract.errors import BridgeError, ErrorCode, error_envelope
from imagebridge.contract.events import CompletedEvent, PartialImageEvent, ProgressEvent
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.provider import EventSink, ProviderEventT
from imagebridge.server.errors import error_response, json_bytes
from imagebridge.server.presence import ClientPresence, watch_disconnect

__all__ = [
    "HEARTBEAT",
    "NATIVE",
    "EndpointStream",
    "EventStreamResponse",
    "StreamDialect",
    "sse_frame",
]

logger = logging.getLogger("imagebridge.server")

HEARTBEAT = b": heartbeat\n\n"
STREAM_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]

Operation = Callable[[EventSink, CancelToken], Awaitable[ImageResponse]]


def sse_frame(event: str, data: bytes | str) -> bytes:
    payload = data.encode() if isinstance(data, str) else data
    return b"event: " + event.encode() + b"\ndata: " + payload + b"\n\n"


class StreamDialect(Protocol):
    """How one operation's events, outcome and failure are written as SSE frames."""

    @property
    def started(self) -> bytes | None:
        """The frame sent at once, or ``None`` to defer the response's start."""
        ...

    def event(self, event: ProviderEventT) -> bytes | None:
        """A provider event's frame, or ``None`` when this dialect has no such event."""
        ...

    def completed(self, response: ImageResponse) -> bytes:
        """The terminal frame(s) of a success (runs in a worker thread: images are big)."""
        ...

    def error(self, error: BridgeError, request_id: str) -> bytes:
        """The terminal frame of a failure."""
        ...


class _Native:
    """The native contract's frames: ``started``, ``progress``/``partial_image``, then one
    ``completed`` (``{type, response}``) or ``error`` (the error envelope)."""

    started = sse_frame("started", b'{"type":"started"}')

    def event(self, event: ProviderEventT) -> bytes | None:
        if not isinstance(event, ProgressEvent | PartialImageEvent):
            return None  # ``started`` was already sent; ``completed`` comes from the runtime
        return sse_frame(event.type, event.to_json())

    def completed(self, response: ImageResponse) -> bytes:
        return sse_frame("completed", CompletedEvent(response=response).to_json())

    def error(self, error: BridgeError, request_id: str) -> bytes:
        return sse_frame("error", json_bytes(error_envelope(error, request_id)))


NATIVE: StreamDialect = _Native()

_Item = bytes | BridgeError | None
"""A frame, the failure to answer (a frame once started, else a JSON error), or the end."""


class EventStreamResponse:
    def __init__(
        self,
        operation: Operation,
        *,
        request_id: str,
        heartbeat_interval: float = 15.0,
        queue_size: int = 4,
        dialect: StreamDialect = NATIVE,
        presence: ClientPresence | None = None,
    ) -> None:
        self._operation = operation
        self._request_id = request_id
        self._heartbeat = heartbeat_interval
        self._queue: asyncio.Queue[_Item] = asyncio.Queue(max(1, queue_size))
        self._closed = False
        self._answered = False
        self._presence = presence or ClientPresence()
        self._dialect = dialect

    async def _sink(self, event: ProviderEventT) -> None:
        if self._closed:
            return
        frame = self._dialect.event(event)
        if frame is not None:
            await self._queue.put(frame)

    async def _run(self) -> None:
        terminal: bytes | BridgeError
        try:
            response = await self._operation(self._sink, self._presence.token)
            terminal = await asyncio.to_thread(self._dialect.completed, response)
        except BridgeError as error:
            terminal = error
        except Exception as exc:  # a bug must still end the stream with exactly one error
            logger.error(
                "unhandled error in an event stream",
                exc_info=(type(exc), exc, exc.__traceback__),
                extra={"request_id": self._request_id},
            )
            terminal = BridgeError(ErrorCode.INTERNAL, "internal error")
        for item in (terminal, None):
            if self._closed:
                return
            await self._queue.put(item)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        worker = asyncio.create_task(self._run())
        gone = asyncio.create_task(watch_disconnect(receive, self._presence))
        try:
            first = await self._begin(scope, receive, send, gone)
            if first is not _ANSWERED and await self._pump(send, gone, first):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client stopped reading; treated like a disconnect below
        finally:
            self._closed = True
            if not self._answered:  # the client left before the terminal answer
                self._presence.departed()
            gone.cancel()
            self._drain()
            with contextlib.suppress(asyncio.CancelledError):
                await gone
            with contextlib.suppress(Exception):
                await worker

    async def _start(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS})

    async def _begin(
        self, scope: Scope, receive: Receive, send: Send, gone: asyncio.Task[None]
    ) -> asyncio.Future[_Item] | object:
        """Start the response; returns the pending first queue read, or ``_ANSWERED``.

        A deferring dialect waits (up to one heartbeat interval) for its first item: an
        error then is answered as plain JSON, anything else starts the stream.
        """
        started = self._dialect.started
        pending = asyncio.ensure_future(self._queue.get())
        if started is not None:
            await self._start(send)
            await send({"type": "http.response.body", "body": started, "more_body": True})
            return pending
        done, _ = await asyncio.wait(
            {pending, gone}, timeout=self._heartbeat, return_when=asyncio.FIRST_COMPLETED
        )
        if pending in done and isinstance(pending.result(), BridgeError):
            error = pending.result()
            assert isinstance(error, BridgeError)
            self._answered = True
            await error_response(error, self._request_id)(scope, receive, send)
            return _ANSWERED
        if gone in done and pending not in done:
            pending.cancel()
            return _ANSWERED
        await self._start(send)
        return pending

    async def _pump(
        self, send: Send, gone: asyncio.Task[None], pending: asyncio.Future[_Item] | object
    ) -> bool:
        """Forward frames until the terminal one (True) or the client leaves (False)."""
        assert isinstance(pending, asyncio.Future)
        try:
            while True:
                done, _ = await asyncio.wait(
                    {pending, gone}, timeout=self._heartbeat, return_when=asyncio.FIRST_COMPLETED
                )
                if pending in done:
                    item = pending.result()
                    if item is None:
                        self._answered = True
                        return True
                    if isinstance(item, BridgeError):
                        item = self._dialect.error(item, self._request_id)
                    await send({"type": "http.response.body", "body": item, "more_body": True})
                    pending = asyncio.ensure_future(self._queue.get())
                elif gone in done:
                    return False
                else:
                    await send({"type": "http.response.body", "body": HEARTBEAT, "more_body": True})
        finally:
            pending.cancel()

    def _drain(self) -> None:
        with contextlib.suppress(asyncio.QueueEmpty):
            while True:
                self._queue.get_nowait()


_ANSWERED = object()
"""``_begin``'s answer when the response is already complete (or the client left)."""


class EndpointStream(Response):
    """Adapts :class:`EventStreamResponse` to what FastAPI expects an endpoint to return."""

    def __init__(self, stream: EventStreamResponse) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = []
        self._stream = stream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._stream(scope, receive, send)
        if self.background is not None:
            await self.background()
