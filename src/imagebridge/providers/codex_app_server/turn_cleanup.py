"""What is left to do after a request is answered: stop its turn, free its session, tidy up.

A request should not wait for housekeeping once it has its image (or its error): an
image can arrive while codex keeps talking to the model, an isolated thread should be
archived, staged input files removed. :class:`TurnCleanup` collects those duties while
the request runs and performs them afterwards — usually in a background task, so it is
also what runs when the request's task was cancelled outright. Every step is bounded and
best effort; the session lease is released as soon as the turn is over (or could not be
confirmed over within the interrupt timeout), so the next turn on the thread may start.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from imagebridge.contract.errors import BridgeError
from imagebridge.providers.codex_app_server.client import ActiveTurn, AppServerClient
from imagebridge.providers.codex_app_server.session_locks import SessionLease
from imagebridge.providers.codex_app_server.staging import StagedBatch

__all__ = ["TurnCleanup"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class TurnCleanup:
    """The duties one request leaves behind; :meth:`run` performs them once."""

    client: AppServerClient
    batch: StagedBatch
    interrupt_timeout: float
    archive_timeout: float
    lease: SessionLease | None = None
    turn: ActiveTurn | None = None
    archive_thread_id: str | None = None
    """An isolated (ephemeral) thread to archive once the turn is over."""
    _stopping: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    @property
    def turn_running(self) -> bool:
        return self.turn is not None and not self.turn.completed

    def release_if_idle(self) -> None:
        """Free the session now when no turn of this request can still be running."""
        if not self.turn_running and self.lease is not None:
            self.lease.release()

    def stop_turn_now(self) -> None:
        """Start interrupting a turn that runs on (its events are drained meanwhile, so
        the link never waits for this request); :meth:`run` finishes the job."""
        if self.turn_running and self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop_turn())

    async def run(self) -> None:
        try:
            if self._stopping is not None:
                await self._stopping
            else:
                await self._stop_turn()
        finally:
            if self.lease is not None:
                self.lease.release()
            await self.batch.cleanup()
        await self._archive()

    async def _stop_turn(self) -> None:
        turn = self.turn
        if turn is None:
            return
        try:
            if not turn.completed and not turn.interrupt_sent:
                status = await turn.interrupt(timeout=self.interrupt_timeout)
                logger.debug(
                    "interrupted a codex turn that ran on (terminal status %s)", status or "none"
                )
        finally:
            turn.close()

    async def _archive(self) -> None:
        thread_id = self.archive_thread_id
        if thread_id is None:
            return
        try:
            # Only the child that holds the ephemeral thread can archive it: never spawn
            # a new one for this (restart=False), and never let a failure surface.
            await self.client.archive_thread(thread_id, timeout=self.archive_timeout, restart=False)
        except BridgeError as error:
            logger.debug("archiving an isolated codex thread failed: %s", error.message)
