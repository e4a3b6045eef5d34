"""Engine events as MCP progress notifications, plus a keep-alive while nothing happens.

Each notification carries a strictly increasing ``progress`` counter and a short message
(``started``, the provider's stage, ``partial image 1 of output 2``, ``completed``). Some
MCP clients abort a tool call after a quiet minute; a heartbeat every few seconds keeps
long generations alive. Notification failures (a client that went away) never fail the
generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from imagebridge.contract.events import (
    CompletedEvent,
    PartialImageEvent,
    ProgressEvent,
    StartedEvent,
)

__all__ = ["ProgressRelay", "Reporter", "event_message"]

logger = logging.getLogger("imagebridge.mcp")

Reporter = Callable[[float, float | None, str | None], Awaitable[None]]
"""``(progress, total, message)``: what ``Context.report_progress`` accepts."""
EngineEvent = StartedEvent | ProgressEvent | PartialImageEvent | CompletedEvent
_MAX_STAGE_CHARS = 80


def event_message(event: EngineEvent) -> str:
    if isinstance(event, StartedEvent):
        return "started"
    if isinstance(event, ProgressEvent):
        stage = "".join(char for char in event.stage if char.isprintable())
        return stage[:_MAX_STAGE_CHARS] or "working"
    if isinstance(event, PartialImageEvent):
        return f"partial image {event.partial_index + 1} of output {event.index + 1}"
    return "completed"


class ProgressRelay:
    def __init__(self, report: Reporter, *, heartbeat_s: float) -> None:
        self._report = report
        self._heartbeat_s = heartbeat_s
        self._count = 0
        self._lock = asyncio.Lock()
        self._started = time.monotonic()
        self._last = self._started

    @property
    def sent(self) -> int:
        return self._count

    async def send(self, message: str) -> None:
        async with self._lock:
            self._count += 1
            self._last = time.monotonic()
            try:
                await self._report(float(self._count), None, message)
            except Exception as exc:  # a client that left must not fail the generation
                logger.debug("progress notification failed", extra={"error": type(exc).__name__})

    async def on_event(self, event: EngineEvent) -> None:
        """The engine's event sink (``started`` was already announced by :meth:`running`)."""
        if not isinstance(event, StartedEvent):
            await self.send(event_message(event))

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            if time.monotonic() - self._last >= self._heartbeat_s * 0.9:
                elapsed = int(time.monotonic() - self._started)
                await self.send(f"still working ({elapsed} s)")

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ProgressRelay]:
        """Announce ``started``, then heartbeats for as long as the block runs."""
        await self.send("started")
        task = asyncio.create_task(self._heartbeat(), name="imagebridge-mcp-heartbeat")
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
