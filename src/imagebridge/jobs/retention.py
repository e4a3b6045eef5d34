"""Pruning of terminal job history: on start, every period, and soon after each job.

A failed run marks retention unhealthy: the manager refuses new submissions and reports
itself unready until a later run succeeds. Prunes requested while one runs collapse into
one more run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from imagebridge.contract.errors import BridgeError
from imagebridge.jobs.settings import JobManagerSettings
from imagebridge.storage.interfaces import JobStore

__all__ = ["Retention"]

logger = logging.getLogger("imagebridge.jobs")


class Retention:
    """Runs the store's prune with the manager's bounds and remembers whether it works."""

    def __init__(
        self, store: JobStore, settings: JobManagerSettings, now: Callable[[], int]
    ) -> None:
        self._store = store
        self._settings = settings
        self._now = now
        self._pruner: asyncio.Task[None] | None = None
        self._prune_wanted = False
        self.healthy = True

    async def run(self) -> int:
        """Prune terminal history once; returns the rows removed.

        A failure marks retention unhealthy (new submissions are refused) until a later
        run succeeds, and is re-raised.
        """
        settings = self._settings
        try:
            removed = await self._store.prune(
                now=self._now(),
                retention_secs=settings.retention_secs,
                max_retained=settings.max_retained,
                max_retained_bytes=settings.max_retained_bytes,
            )
        except BridgeError as error:
            if self.healthy:
                logger.error("durable job retention failed", extra={"code": error.code.value})
            self.healthy = False
            raise
        self.healthy = True
        return removed

    async def loop(self) -> None:
        """Run every ``retention_period_s`` until cancelled."""
        period = self._settings.retention_period_s
        while True:
            await asyncio.sleep(period)
            try:
                await self.run()
            except BridgeError:
                pass  # already logged and recorded as unhealthy
            except Exception:  # a store bug must not end the loop silently
                logger.exception("durable job retention failed unexpectedly")
                self.healthy = False

    def request(self) -> None:
        """Prune soon; prunes requested while one runs collapse into one more run."""
        self._prune_wanted = True
        if self._pruner is None or self._pruner.done():
            self._pruner = asyncio.create_task(self._prune_pending(), name="imagebridge-prune")

    async def settle(self) -> None:
        """Wait for a requested prune to finish (at shutdown)."""
        if self._pruner is not None:
            await asyncio.gather(self._pruner, return_exceptions=True)

    async def _prune_pending(self) -> None:
        while self._prune_wanted:
            self._prune_wanted = False
            with contextlib.suppress(BridgeError):
                await self.run()
