"""Half-done writes put right: the artifact store's repair, at start and periodically.

A process killed mid-write leaves, by construction (docs/operations.md, "Faults of the
machine"), only things a rule recognises: a hidden temp file (removed once older than
``stale_temp_secs``), an ownership marker whose file never got its name (removed), a
marker naming a sidecar that never got its name (reference cleared). The server applies
those rules once when it starts and every ``artifacts.retention.repair_interval_secs``
after that (the filesystem store in a worker thread); a failed run is logged and retried
at the next interval. On an S3 bucket the same repair removes objects no marker names and
aborts stale multipart uploads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from imagebridge.artifacts.interfaces import ArtifactBackend
from imagebridge.artifacts.records import RepairReport
from imagebridge.contract.errors import BridgeError

__all__ = ["ArtifactRecovery"]

logger = logging.getLogger("imagebridge.server")


class ArtifactRecovery:
    """Runs the backend's ``repair_orphans`` (applying) now and every ``interval_s``."""

    def __init__(
        self, store: ArtifactBackend, *, interval_s: float, max_scan: int, stale_temp_secs: int
    ) -> None:
        self._store = store
        self._interval_s = interval_s
        self._max_scan = max_scan
        self._stale_temp_secs = stale_temp_secs
        self._task: asyncio.Task[None] | None = None
        self.last: RepairReport | None = None
        self.runs = 0

    def start(self) -> None:
        if self._task is None and self._interval_s > 0:
            self._task = asyncio.create_task(self._loop(), name="imagebridge-artifact-repair")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run_once(self) -> RepairReport | None:
        try:
            report = await self._store.repair_orphans(
                self._max_scan, apply=True, stale_temp_secs=self._stale_temp_secs
            )
        except (BridgeError, OSError) as error:
            logger.warning("artifact repair did not run: %s", error)
            return None
        self.runs += 1
        self.last = report
        if report.repaired or report.stale_temp_files_removed:
            logger.info(
                "artifact repair: %d records repaired, %d crash leftovers removed",
                report.repaired,
                report.stale_temp_files_removed,
            )
        return report

    async def _loop(self) -> None:
        while True:
            await self.run_once()
            await asyncio.sleep(self._interval_s)
