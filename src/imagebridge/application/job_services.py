"""Open the job manager and the preset service on one database, and close them in order.

Presets live in the jobs database (``server.jobs.database``), each store with its own
migrations. The location picks the backend: a path is SQLite, for one bridge instance; a
``postgresql://`` URL is PostgreSQL, shared by every instance pointed at it, and the
manager then runs in shared mode. Surfaces (server, CLI, benchmarks) use this instead of
repeating the wiring; the runtime stays theirs to build and to close *after*
:meth:`JobServices.aclose`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from imagebridge.engine.runtime import ImageRuntime
from imagebridge.jobs.manager import JobManager
from imagebridge.jobs.outcomes import OutcomeObserver
from imagebridge.jobs.presets import PresetService
from imagebridge.jobs.settings import JobManagerSettings
from imagebridge.jobs.shared_mode import SharedQueueSettings
from imagebridge.jobs.sync_records import SyncRecordSettings
from imagebridge.keys import KeyService
from imagebridge.storage import (
    PostgresOptions,
    PresetStore,
    ResponseStore,
    SharedJobStore,
    attach_outbox,
    is_postgres_url,
    open_job_store,
    open_preset_store,
    open_response_store,
)
from imagebridge.webhooks import WebhookService

__all__ = ["JobServices"]


@dataclass(slots=True)
class JobServices:
    jobs: JobManager
    presets: PresetService
    job_store: SharedJobStore
    preset_store: PresetStore
    responses: ResponseStore
    """Kept OpenAI responses (``POST /v1/responses`` with ``store``), in the jobs database."""

    @classmethod
    async def open(
        cls,
        database: str | os.PathLike[str],
        runtime: ImageRuntime,
        settings: JobManagerSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
        queue: SharedQueueSettings | None = None,
        postgres: PostgresOptions | None = None,
        shared: bool | None = None,
        settle_timeout_s: float = 30.0,
        keys: KeyService | None = None,
        observer: OutcomeObserver | None = None,
        webhooks: WebhookService | None = None,
        sync: SyncRecordSettings | None = None,
    ) -> Self:
        """Open both stores (not yet started: call :meth:`start` when ready to serve).

        ``queue`` names this instance and times its leases; ``postgres`` says how to use a
        PostgreSQL location. ``shared`` forces shared mode on or off (default: on exactly
        for PostgreSQL; SQLite supports it on one host, which tests use).
        ``settle_timeout_s`` bounds the wait for interrupted jobs at shutdown. ``keys``
        makes a key's jobs reserve its images when they run; ``observer`` is told every
        job run's outcome (the server's metrics). ``webhooks`` makes the job store write
        each job's ``job.*`` event in the transaction of its final status; ``sync`` times
        the joining of synchronous requests' retries (``[server.sync]``).
        """
        job_store = await open_job_store(database, postgres=postgres)
        try:
            if webhooks is not None:
                attach_outbox(job_store, webhooks.store, webhooks.limits)
            preset_store = await open_preset_store(database, postgres=postgres)
        except BaseException:
            await job_store.close()
            raise
        try:
            responses = await open_response_store(database, postgres=postgres)
        except BaseException:
            await job_store.close()
            await preset_store.close()
            raise
        queue = queue or SharedQueueSettings()
        if shared is None:
            shared = is_postgres_url(database)
        manager = JobManager(
            runtime,
            job_store,
            settings,
            clock=clock,
            settle_timeout_s=settle_timeout_s,
            shared=queue if shared else None,
            instance_id=queue.instance_id,
            keys=keys,
            observer=observer,
            sync=sync,
        )
        return cls(
            jobs=manager,
            presets=PresetService(preset_store, runtime.settings.request_limits, clock=clock),
            job_store=job_store,
            preset_store=preset_store,
            responses=responses,
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
                try:
                    await self.preset_store.close()
                finally:
                    await self.responses.close()
