"""Durable jobs: persist a request, run it later through the runtime, keep its history.

Lifecycle: a submission is validated, stored as ``queued`` and
scheduled; a bounded pool claims queued jobs oldest first and executes each through the
runtime with its own cancellation token; the outcome is written back and old history is
pruned. The database is the source of truth: a job left ``running`` by a stopped bridge is
recorded ``interrupted`` at the next start and never re-run (its upstream call may have
happened), while ``queued`` jobs simply resume.

Shared mode (``shared=``, several instances on one PostgreSQL database): the queue lives in
the store instead of this process. Workers claim the oldest job routed to one of this
instance's providers under a lease, heartbeats keep the leases, expired leases end
``interrupted``, and notifications carry new work and cancellations between instances
(:mod:`imagebridge.jobs.shared_mode`). Nothing is recovered at start: another instance's
``running`` jobs are alive until their lease says otherwise.

Running one claimed job and recording its outcome is :mod:`imagebridge.jobs.execution`,
its progress :mod:`imagebridge.jobs.progress`, history pruning
:mod:`imagebridge.jobs.retention`, the worker pool that claims and runs scheduled jobs
:mod:`imagebridge.jobs.workers`; this module submits, schedules, cancels and lists. Every
blocking step (SQLite, JSON of large requests, preview decoding) runs off the event loop.
Logs name job ids and error codes only, never prompts or image bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from imagebridge.contract.enums import ImageJobStatus, ResponseFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.jobs import ImageJob, ImageJobPage, ImageJobUpdate
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.idempotency import request_fingerprint
from imagebridge.engine.runtime import ImageRuntime
from imagebridge.engine.validation import RequestLimits, validate_request
from imagebridge.imaging.ids import uuid7
from imagebridge.jobs.execution import SHUTDOWN_REASON, JobRunner
from imagebridge.jobs.outcomes import OutcomeObserver
from imagebridge.jobs.previews import JobKey, PartialPreview, PreviewCache
from imagebridge.jobs.query import job_query
from imagebridge.jobs.retention import Retention
from imagebridge.jobs.settings import JobManagerSettings
from imagebridge.jobs.shared_mode import (
    CANCEL_REASON,
    SharedQueue,
    SharedQueueSettings,
    default_instance_id,
)
from imagebridge.jobs.store_retry import StoreRetry
from imagebridge.jobs.sync_records import SyncRecords, SyncRecordSettings
from imagebridge.jobs.trimming import result_text
from imagebridge.jobs.views import job_view, page_view
from imagebridge.jobs.workers import JobWorkers
from imagebridge.keys import KeyService
from imagebridge.storage.interfaces import JobStore, SharedJobStore
from imagebridge.storage.records import (
    JobEventKind,
    JobIdentity,
    JobOrigin,
    JobVisibility,
)

__all__ = ["QUEUED_PAGE", "JobManager"]

logger = logging.getLogger("imagebridge.jobs")

LOCAL_OUTCOME_RETRY_S = 300.0
"""How long a single instance keeps retrying a job's outcome row its database refused for a
retryable reason (a full disk, an I/O error, a lock held too long)."""
QUEUED_PAGE = 500
"""Queued rows read per query while scheduling at start."""
_CANCEL_REASON = CANCEL_REASON


def _prepare_submission(
    request: ImageRequest, key: str | None, limits: RequestLimits
) -> tuple[ImageRequest, str, str]:
    """Blocking: force artifact delivery, validate, and return (stored, JSON, fingerprint)."""
    forced = request.model_copy(
        update={
            "output": request.output.model_copy(
                update={"response_format": ResponseFormat.ARTIFACT}
            ),
            "idempotency_key": key,
        }
    )
    validate_request(forced, limits)
    stored = forced.model_copy(update={"idempotency_key": None})
    return stored, result_text(stored.to_wire()), request_fingerprint(stored)


class JobManager(JobWorkers):
    """Submits, schedules, executes, cancels and lists durable image jobs.

    Call :meth:`start` once before serving and :meth:`shutdown` before closing the runtime
    and the store (the manager closes neither: it does not own them). With ``shared``, the
    store must be a :class:`SharedJobStore` and the manager runs in shared mode (module
    docstring); ``instance_id`` names a single-instance manager in diagnostics.
    """

    def __init__(
        self,
        runtime: ImageRuntime,
        store: JobStore,
        settings: JobManagerSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
        settle_timeout_s: float = 30.0,
        queued_page: int = QUEUED_PAGE,
        shared: SharedQueueSettings | None = None,
        instance_id: str | None = None,
        keys: KeyService | None = None,
        observer: OutcomeObserver | None = None,
        sync: SyncRecordSettings | None = None,
    ) -> None:
        self._runtime = runtime
        self._store = store
        self._settings = settings or JobManagerSettings()
        self._clock = clock
        self._settle_timeout_s = settle_timeout_s
        self._queued_page = queued_page
        self._previews = PreviewCache(self._settings.partial_preview_max_bytes)
        # Shared mode: the database may restart under a running job; its lease is how
        # long an outcome may wait for it (then another instance takes over). One
        # instance: a full disk may refuse the outcome row; it is written as soon as space
        # returns within LOCAL_OUTCOME_RETRY_S (else at the next start the row becomes
        # interrupted). A synchronous request's record is written the same way.
        outcome_retry = StoreRetry(
            float(shared.lease_secs) if shared is not None else LOCAL_OUTCOME_RETRY_S,
            shared.poll_interval_s if shared is not None else 0.5,
            shared.heartbeat_secs if shared is not None else 5.0,
        )
        self._runner = JobRunner(
            runtime,
            store,
            self._previews,
            self._now,
            keys,
            retry_window_s=outcome_retry.window_s,
            retry_pause_s=outcome_retry.pause_s,
            retry_max_pause_s=outcome_retry.max_pause_s,
            observer=observer,
        )
        self._queue: asyncio.Queue[JobKey] = asyncio.Queue()
        self._scheduled: set[JobKey] = set()
        self._tokens: dict[JobKey, CancelToken] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(self._settings.max_running)
        self._dispatcher: asyncio.Task[None] | None = None
        self._retention: asyncio.Task[None] | None = None
        self._pruning = Retention(store, self._settings, self._now)
        self._start_lock = asyncio.Lock()
        self._started = False
        self._stopping = False
        self._stopped: asyncio.Future[None] | None = None
        self._running_ids: dict[str, CancelToken] = {}
        self._shared: SharedQueue | None = None
        self._instance_id = instance_id or default_instance_id()
        if shared is not None:
            if not isinstance(store, SharedJobStore):
                raise BridgeError(
                    ErrorCode.CONFIGURATION, "shared job mode needs a shared job store"
                )
            self._instance_id = shared.instance_id
            self._shared = SharedQueue(
                store,
                shared,
                providers=runtime.registry.names,
                slots=self._slots,
                launch=self._launch_claimed,
                running=lambda: self._running_ids,
                now=self._now,
            )
        self.sync_records = SyncRecords(
            store,
            sync or SyncRecordSettings(),
            now=self._now,
            tokens=self._tokens,
            running=self._running_ids,
            shutting_down=lambda: self._runtime.shutting_down,
            lease=(shared.instance_id, shared.lease_secs) if shared is not None else None,
            retry=outcome_retry,
        )
        """Synchronous requests' records in this history (:mod:`.sync_records`)."""

    # -- state -------------------------------------------------------------------------------

    @property
    def settings(self) -> JobManagerSettings:
        return self._settings

    @property
    def started(self) -> bool:
        return self._started

    @property
    def shutting_down(self) -> bool:
        return self._stopping

    @property
    def active_workers(self) -> int:
        """Jobs currently claimed or executing in this process."""
        return len(self._tasks)

    @property
    def shared(self) -> bool:
        """Whether this manager shares its queue with other instances (shared mode)."""
        return self._shared is not None

    @property
    def instance_id(self) -> str:
        return self._instance_id

    @property
    def store_reachable(self) -> bool:
        """In shared mode, whether the shared store answers right now (readiness); a
        single-instance store is checked by the readiness probe instead."""
        return self._shared is None or self._shared.connected

    @property
    def shared_queue(self) -> SharedQueue | None:
        """The shared-mode loops (tests drive heartbeats and reaping through it)."""
        return self._shared

    def _now(self) -> int:
        return max(0, int(self._clock()))

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Recover, prune, schedule every queued job oldest first, start the loops.

        Shared mode recovers nothing (leases do) and schedules nothing: it starts claiming.
        """
        async with self._start_lock:
            if self._started:
                return
            if self._stopping:
                raise BridgeError(ErrorCode.INTERNAL, "durable job manager was shut down")
            if self._shared is None:
                recovered = await self._store.recover_interrupted(now=self._now())
                if recovered:
                    logger.warning(
                        "durable jobs interrupted by a previous stop", extra={"count": recovered}
                    )
            with contextlib.suppress(BridgeError):  # recorded as unhealthy retention
                await self.run_retention()
            self._started = True  # submissions from here on schedule themselves
            try:
                if self._shared is None:
                    await self._schedule_queued()
                else:
                    await self._shared.start()
            except BaseException:
                self._started = False
                raise
            if self._shared is None:
                self._dispatcher = asyncio.create_task(self._dispatch(), name="imagebridge-jobs")
            self._retention = asyncio.create_task(
                self._pruning.loop(), name="imagebridge-jobs-retention"
            )

    async def _schedule_queued(self) -> None:
        """Page through every queued row (the original scheduled only the first max_pending)."""
        after: JobIdentity | None = None
        while True:
            batch = await self._store.queued_identities(self._queued_page, after=after)
            for identity in batch:
                self._schedule((identity.auth_scope, identity.id))
            if len(batch) < self._queued_page:
                return
            after = batch[-1]

    async def shutdown(self, timeout_s: float | None = None) -> None:
        """Stop claiming, let running jobs finish within ``timeout_s``, interrupt the rest.

        Queued jobs stay queued in the database and resume at the next start. Idempotent.
        """
        if self._stopped is not None:
            await asyncio.shield(self._stopped)
            return
        self._stopped = asyncio.get_running_loop().create_future()
        try:
            await self._shutdown(
                self._settings.shutdown_timeout_s if timeout_s is None else timeout_s
            )
        finally:
            self._stopped.set_result(None)

    async def stop_claiming(self) -> None:
        """The first step of a shutdown: refuse submissions and start no queued job;
        running jobs go on (and, in shared mode, keep their leases). Idempotent."""
        self._stopping = True
        if self._shared is not None:
            await self._shared.stop_claiming()  # heartbeats go on while jobs drain
        dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await dispatcher

    async def wait_idle(self) -> None:
        """Return once no job runs in this process (the caller bounds the wait)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def _shutdown(self, timeout_s: float) -> None:
        await self.stop_claiming()
        retention, self._retention = self._retention, None
        if retention is not None:
            retention.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await retention
        try:
            await self._drain(timeout_s)
        finally:
            if self._shared is not None:
                await self._shared.stop()
        await self._pruning.settle()

    async def _drain(self, timeout_s: float) -> None:
        pending = set(self._tasks)
        if pending:
            _, pending = await asyncio.wait(pending, timeout=max(0.0, timeout_s))
        if pending:
            logger.warning(
                "interrupting durable jobs still running at shutdown",
                extra={"count": len(pending)},
            )
            for token in list(self._tokens.values()):
                token.cancel(SHUTDOWN_REASON)
            _, pending = await asyncio.wait(pending, timeout=self._settle_timeout_s)
            for task in pending:  # left running: recovered at next start (or lease expiry)
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def healthy(self) -> bool:
        """Ready to take work: started, not stopping, retention working, store answering."""
        if not self._started or self._stopping or not self._pruning.healthy:
            return False
        return await self._store.healthy()

    # -- retention ---------------------------------------------------------------------------

    async def run_retention(self) -> int:
        """Prune terminal history once; returns the rows removed (a failure marks
        retention unhealthy until a later run succeeds, and is re-raised)."""
        return await self._pruning.run()

    # -- caller operations -------------------------------------------------------------------

    def _check_accepting(self) -> None:
        if self._stopping or self._runtime.shutting_down:
            raise BridgeError(
                ErrorCode.OVERLOADED,
                "durable job manager is shutting down",
                retryable=True,
            )
        if not self._pruning.healthy:
            raise BridgeError(
                ErrorCode.OVERLOADED,
                "durable job retention is unhealthy",
                retryable=True,
            )

    async def submit(
        self,
        scope: str,
        request: ImageRequest,
        *,
        idempotency_key: str | None = None,
        job_id: str | None = None,
    ) -> tuple[ImageJob, bool]:
        """Persist and schedule ``request``; returns the job and whether it was created.

        ``job_id`` names the new job (a background response writes its own row naming the
        job before the job exists, so the job's end finds it); default: a fresh UUIDv7.

        ``idempotency_key`` is the header value; the body's key is used when it is absent.
        A replay (same scope, key and request) returns the current state of the original job
        without new work, even when the queue is full.
        """
        self._check_accepting()
        body_key = request.idempotency_key
        if idempotency_key is not None and body_key is not None and idempotency_key != body_key:
            raise BridgeError.invalid_request(
                "Idempotency-Key conflicts with the request body",
                field="idempotency_key",
            )
        key = idempotency_key if idempotency_key is not None else body_key
        stored, text, fingerprint = await asyncio.to_thread(
            _prepare_submission, request, key, self._runtime.settings.request_limits
        )
        settings = self._settings
        job_id = job_id or str(uuid7())
        common: dict[str, Any] = {
            "submission_key": key,
            "fingerprint": fingerprint if key is not None else None,
            "now": self._now(),
            "max_pending": settings.max_pending,
            "max_database_bytes": settings.max_database_bytes,
        }
        if isinstance(self._store, SharedJobStore):
            route = stored.routing.provider or self._runtime.registry.default
            result = await self._store.create(
                scope, job_id, text, stored.prompt, provider=route, **common
            )
        else:
            result = await self._store.create(scope, job_id, text, stored.prompt, **common)
        job = await asyncio.to_thread(job_view, result.job, stored if result.created else None)
        if result.created:
            if self._shared is not None:
                self._shared.wake()
                await self._shared.notify(JobEventKind.QUEUED, job_id)
            elif self._started and not self._stopping:
                self._schedule((scope, result.job.id))
        return job, result.created

    async def get(self, scope: str, job_id: str) -> ImageJob:
        """The job with its request, and result or error; another scope's job is not found."""
        job, _ = await self.detail(scope, job_id)
        return job

    async def detail(self, scope: str, job_id: str) -> tuple[ImageJob, JobOrigin]:
        """:meth:`get`, and which surface started the record (a job, or a synchronous
        request's record)."""
        record = await self._store.get(scope, job_id)
        return await asyncio.to_thread(job_view, record), record.origin

    async def list(
        self,
        scope: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        status: ImageJobStatus | str | None = None,
        visibility: JobVisibility | str | None = None,
        favorite: bool | None = None,
        search: str | None = None,
        include_deleted: bool | None = None,
        origin: JobOrigin | str | None = None,
    ) -> ImageJobPage:
        """One page of the scope's history, newest first (``None``: the key was absent).

        Jobs and synchronous requests' records are listed together; ``origin`` keeps one
        surface's (``job``, ``sync``, ``stream``, ``openai``)."""
        query = job_query(
            limit=limit,
            cursor=cursor,
            status=status,
            visibility=visibility,
            favorite=favorite,
            search=search,
            include_deleted=include_deleted,
        )
        page = await self._store.list(
            scope,
            visibility=query.visibility,
            status=query.status,
            favorite=query.favorite,
            search=query.search,
            cursor=query.cursor,
            limit=query.limit,
            origin=origin,
        )
        return page_view(page)

    async def cancel(self, scope: str, job_id: str) -> ImageJob:
        """Queued → cancelled at once; running → flagged durably, then its token is cancelled.

        In shared mode a job running on another instance is reached by a notification (and,
        failing that, by that instance's next heartbeat).
        """
        record = await self._store.request_cancel(scope, job_id, now=self._now())
        if record.status is ImageJobStatus.RUNNING:
            token = self._tokens.get((scope, job_id))
            if token is not None:
                token.cancel(_CANCEL_REASON)
            elif self._shared is not None:
                await self._shared.notify(JobEventKind.CANCEL_REQUESTED, job_id)
        return await asyncio.to_thread(job_view, record)

    async def update(self, scope: str, job_id: str, update: ImageJobUpdate) -> ImageJob:
        """Set the favourite marker and/or soft-delete or restore a finished job."""
        if update.favorite is None and update.deleted is None:
            raise BridgeError.invalid_request(
                "history update must change favorite or deleted state"
            )
        record = await self._store.update_history(
            scope, job_id, favorite=update.favorite, deleted=update.deleted, now=self._now()
        )
        return await asyncio.to_thread(job_view, record)

    def partial(self, scope: str, job_id: str) -> PartialPreview | None:
        """The latest verified preview of a running job of ``scope``, if any."""
        return self._previews.get((scope, job_id))

    async def statistics(self) -> dict[str, Any]:
        """Counts, sizes and bounds for diagnostics (its ``jobs`` object): exactly the
        original's keys, since its SDK refuses any other (see :meth:`queue_statistics`)."""
        stats = await self._store.statistics()
        settings = self._settings
        return {
            "total": stats.total,
            "queued": stats.queued,
            "running": stats.running,
            "succeeded": stats.succeeded,
            "failed": stats.failed,
            "cancelled": stats.cancelled,
            "interrupted": stats.interrupted,
            "hidden": stats.hidden,
            "database_bytes": stats.database_bytes,
            "logical_bytes": stats.logical_bytes,
            "active_workers": self.active_workers,
            "max_pending": settings.max_pending,
            "max_running": settings.max_running,
            "retention_secs": settings.retention_secs,
            "max_retained": settings.max_retained,
            "max_retained_bytes": settings.max_retained_bytes,
            "max_database_bytes": settings.max_database_bytes,
        }

    async def queue_statistics(self) -> dict[str, Any]:
        """Who runs what (issue 14): this instance, running leases per instance, queue
        depth per provider route (``"*"``: jobs any instance may claim). An addition to the
        original's statistics, served by ``/v1/diagnostics/extended`` only."""
        leases: dict[str, int] = {}
        queued: dict[str, int] = {}
        if isinstance(self._store, SharedJobStore):
            leases = await self._store.instance_counts()
            queued = await self._store.queued_by_provider()
        return {
            "shared": self._shared is not None,
            "instance_id": self._instance_id,
            "leases": leases,
            "queued_by_provider": queued,
        }
