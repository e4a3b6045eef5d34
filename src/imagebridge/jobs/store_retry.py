"""Writing a final row while the store may be away for a moment: retry, then recognise.

Both a job's outcome (:mod:`.execution`) and a synchronous request's record
(:mod:`.sync_records`) are written after work that cannot be repeated (the provider ran):
losing that row to a passing fault (a PostgreSQL restart, a full disk that is cleared) is
worse than waiting for it. :class:`StoreRetry` repeats a store call while it fails
retryably and the window lasts, with a pause growing from ``pause_s`` to ``max_pause_s``;
:meth:`StoreRetry.write_outcome` also recognises a write whose commit was lost with the
connection (the retry finds the row already final) as done. Store calls are safe to repeat.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError

__all__ = ["StoreRetry"]

logger = logging.getLogger("imagebridge.jobs")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StoreRetry:
    """How long, and how patiently, a store call is repeated while the store is away."""

    window_s: float = 0.0
    pause_s: float = 0.5
    max_pause_s: float = 10.0

    async def retrying(self, call: Callable[[], Awaitable[T]], job_id: str) -> T:
        """``call()``, repeated while it fails retryably and the window lasts; the last
        failure is raised."""
        deadline = time.monotonic() + self.window_s
        pause = self.pause_s
        longest = max(self.pause_s, self.max_pause_s)
        while True:
            try:
                return await call()
            except BridgeError as error:
                if not error.retryable or time.monotonic() + pause > deadline:
                    raise
                logger.warning(
                    "durable job store unavailable; retrying",
                    extra={"job_id": job_id, "code": error.code.value},
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, longest)

    async def write_outcome(
        self, job_id: str, status: ImageJobStatus, write: Callable[[], Awaitable[object]]
    ) -> None:
        """``write()`` the final row, retried while the store is away. A retry that finds
        the row already ``status`` means an earlier attempt committed but its answer was
        lost with the connection: done, not an error."""
        uncertain = False

        async def attempt() -> None:
            nonlocal uncertain
            try:
                await write()
            except BridgeError as error:
                if uncertain and error.details.get("status") == status.value:
                    return
                uncertain = uncertain or error.retryable
                raise

        await self.retrying(attempt, job_id)
