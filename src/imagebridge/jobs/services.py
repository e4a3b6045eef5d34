"""Open the job manager and the preset service on one SQLite file, and close them in order.

Presets live in the jobs database (``server.jobs.database``), each store with its own
migrations. Surfaces (server, CLI, benchmarks) use this instead of repeating the wiring;
the runtime stays theirs to build and to close *after* :meth:`JobServices.aclose`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from imagebridge.engine.orchestrator import ImageRuntime
from imagebridge.jobs.manager import JobManager
from imagebridge.jobs.presets import PresetService
from imagebridge.jobs.settings import JobManagerSettings
from imagebridge.storage import SqliteJobStore, SqlitePresetStore

__all__ = ["JobServices"]


@dataclass(slots=True)
class JobServices:
    jobs: JobManager
    presets: PresetService
    job_store: SqliteJobStore
    preset_store: SqlitePresetStore

    @classmethod
    async def open(
        cls,
        database: str | os.PathLike[str],
        runtime: ImageRuntime,
        settings: JobManagerSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> Self:
        """Open both stores (not yet started: call :meth:`start` when ready to serve)."""
        job_store = await SqliteJobStore.open(database)
        try:
            preset_store = await SqlitePresetStore.open(database)
        except BaseException:
            await job_store.close()
            raise
        return cls(
            jobs=JobManager(runtime, job_store, settings, clock=clock),
            presets=PresetService(preset_store, runtime.settings.request_limits, clock=clock),
            job_store=job_store,
            preset_store=preset_store,
        )

    async def start(self) -> None:
        await self.jobs.start()

    async def aclose(self, timeout_s: float | None = None) -> None:
        """Shut the manager down (running jobs get ``timeout_s``), then close both stores."""
        try:
            await self.jobs.shutdown(timeout_s)
        finally:
            try:
                await self.job_store.close()
            finally:
                await self.preset_store.close()
