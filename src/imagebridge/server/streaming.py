"""The SSE lifecycle of one operation, as a pure ASGI response.

``started`` goes out at once; provider ``progress`` and ``partial_image`` events pass
through a small bounded queue, so a slow reader slows the provider instead of growing
memory; exactly one ``completed`` or ``error`` ends the stream. Idle streams carry a
``: heartbeat`` comment so proxies keep them open. When the client goes away the
operation's cancel token fires and upstream work stops; the stream still waits for the
runtime to settle so no work outlives the request unobserved.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from starlette.types import Receive, Scope, Send

from imagebridge.contract.errors import BridgeError, ErrorCode, error_envelope
from imagebridge.contract.events import CompletedEvent, PartialImageEvent, ProgressEvent
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.provider import EventSink, ProviderEventT
from imagebridge.server.errors import json_bytes
from imagebridge.server.execution import watch_disconnect

__all__ = ["HEARTBEAT", "EventStreamResponse", "sse_frame"]

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


_STARTED = sse_frame("started", b'{"type":"started"}')


class EventStreamResponse:
    def __init__(
        self,
        operation: Operation,
        *,
        request_id: str,
        heartbeat_interval: float = 15.0,
        queue_size: int = 4,
    ) -> None:
        self._operation = operation
        self._request_id = request_id
        self._heartbeat = heartbeat_interval
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(max(1, queue_size))
        self._closed = False
        self._token = CancelToken()

    async def _sink(self, event: ProviderEventT) -> None:
        if self._closed or not isinstance(event, ProgressEvent | PartialImageEvent):
            return  # ``started`` was already sent; ``completed`` comes from the runtime
        await self._queue.put(sse_frame(event.type, event.to_json()))

    async def _run(self) -> None:
        try:
            response = await self._operation(self._sink, self._token)
            completed = CompletedEvent(response=response)
            terminal = sse_frame("completed", await asyncio.to_thread(completed.to_json))
        except BridgeError as error:
            terminal = self._error_frame(error)
        except Exception as exc:  # a bug must still end the stream with exactly one error
            logger.error(
                "unhandled error in an event stream",
                exc_info=(type(exc), exc, exc.__traceback__),
                extra={"request_id": self._request_id},
            )
            terminal = self._error_frame(BridgeError(ErrorCode.INTERNAL, "internal error"))
        for item in (terminal, None):
            if self._closed:
                return
            await self._queue.put(item)

    def _error_frame(self, error: BridgeError) -> bytes:
        return sse_frame("error", json_bytes(error_envelope(error, self._request_id)))

    def _drain(self) -> None:
        with contextlib.suppress(asyncio.QueueEmpty):
            while True:
                self._queue.get_nowait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS})
        worker = asyncio.create_task(self._run())
        gone = asyncio.create_task(watch_disconnect(receive, self._token))
        try:
            await send({"type": "http.response.body", "body": _STARTED, "more_body": True})
            if await self._pump(send, gone):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client stopped reading; treated like a disconnect below
        finally:
            self._closed = True
            self._token.cancel("client disconnected")
            gone.cancel()
            self._drain()
            with contextlib.suppress(asyncio.CancelledError):
                await gone
            with contextlib.suppress(Exception):
                await worker

    async def _pump(self, send: Send, gone: asyncio.Task[None]) -> bool:
        """Forward frames until the terminal one (True) or the client leaves (False)."""
        pending = asyncio.ensure_future(self._queue.get())
        try:
            while True:
                done, _ = await asyncio.wait(
                    {pending, gone}, timeout=self._heartbeat, return_when=asyncio.FIRST_COMPLETED
                )
                if pending in done:
                    item = pending.result()
                    if item is None:
                        return True
                    await send({"type": "http.response.body", "body": item, "more_body": True})
                    pending = asyncio.ensure_future(self._queue.get())
                elif gone in done:
                    return False
                else:
                    await send({"type": "http.response.body", "body": HEARTBEAT, "more_body": True})
        finally:
            pending.cancel()
