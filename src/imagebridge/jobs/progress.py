"""A running job's provider events, recorded as durable progress and previews.

Events pass through a small buffer to a single consumer task, so a provider only waits
when progress falls :data:`EVENT_BUFFER` events behind. Events that arrive together are
recorded together: one progress write with the latest stage and count, and only the
newest preview decoded. Failures are logged, never raised: progress is best effort.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.events import (
    CompletedEvent,
    PartialImageEvent,
    ProgressEvent,
    StartedEvent,
)
from imagebridge.engine.provider import ProviderEventT
from imagebridge.jobs.previews import JobKey, PreviewCache
from imagebridge.storage.interfaces import JobStore

__all__ = ["EVENT_BUFFER", "ProgressRelay", "progress_stage"]

logger = logging.getLogger("imagebridge.jobs")

EVENT_BUFFER = 16
"""Provider events buffered per job before the provider waits for progress to be recorded."""


def progress_stage(event: ProviderEventT) -> str:
    """The durable progress stage a provider event moves a job to."""
    if isinstance(event, StartedEvent):
        return "provider"
    if isinstance(event, ProgressEvent):
        return "provider_progress"
    if isinstance(event, PartialImageEvent):
        return "partial_image"
    if isinstance(event, CompletedEvent):
        return "materializing"
    raise TypeError(f"not a provider event: {type(event).__name__}")


class ProgressRelay:
    """Turns one job's provider events into progress rows and previews, off the provider."""

    def __init__(
        self,
        store: JobStore,
        previews: PreviewCache,
        key: JobKey,
        now: Callable[[], int],
    ) -> None:
        self._store = store
        self._previews = previews
        self._key = key
        self._now = now
        self._queue: asyncio.Queue[ProviderEventT | None] = asyncio.Queue(EVENT_BUFFER)
        self._closed = False
        self.partial_images = 0
        self._task = asyncio.create_task(self._consume(), name="imagebridge-job-progress")

    async def sink(self, event: ProviderEventT) -> None:
        if not self._closed:
            await self._queue.put(event)

    async def close(self) -> None:
        """Record every event already delivered, then stop."""
        self._closed = True
        if self._task.done():
            return
        try:
            await self._queue.put(None)
            await self._task
        except BaseException:
            self._task.cancel()
            raise

    async def _consume(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            events = [event for event in batch if event is not None]
            if events:
                try:
                    await self._record(events)
                except Exception:  # progress is best effort; the job itself goes on
                    logger.exception("durable job progress handling failed")
            if len(events) < len(batch):
                return

    async def _record(self, events: list[ProviderEventT]) -> None:
        scope, job_id = self._key
        partials = [event for event in events if isinstance(event, PartialImageEvent)]
        if partials:
            self.partial_images = min(self.partial_images + len(partials), 4_294_967_295)
            await self._previews.offer(self._key, partials[-1])
        try:
            await self._store.progress(
                scope,
                job_id,
                stage=progress_stage(events[-1]),
                partial_images=self.partial_images,
                now=self._now(),
            )
        except BridgeError as error:
            logger.warning(
                "could not record durable job progress",
                extra={"job_id": job_id, "code": error.code.value},
            )
