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

Every blocking step (SQLite, JSON of large requests, preview decoding) runs off the event
loop. Logs name job ids and error codes only, never prompts or image bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from imagebridge.contract.enums import ImageJobStatus, ResponseFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import (
    CompletedEvent,
    PartialImageEvent,
    ProgressEvent,
    StartedEvent,
)
from imagebridge.contract.jobs import ImageJob, ImageJobPage, ImageJobUpdate
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.idempotency import request_fingerprint
from imagebridge.engine.orchestrator import ExecutionContext, ImageRuntime
from imagebridge.engine.provider import ProviderEventT
from imagebridge.engine.validation import RequestLimits, validate_request
from imagebridge.imaging.ids import uuid7
from imagebridge.jobs.previews import PartialPreview, PreviewCache
from imagebridge.jobs.query import job_query
from imagebridge.jobs.settings import JobManagerSettings
from imagebridge.jobs.shared_mode import (
    CANCEL_REASON,
    LEASE_LOST_REASON,
    SharedQueue,
    SharedQueueSettings,
    default_instance_id,
)
from imagebridge.jobs.trimming import fit_result, result_text
from imagebridge.jobs.views import job_view, page_view
from imagebridge.storage.interfaces import JobStore, SharedJobStore
from imagebridge.storage.records import JobEventKind, JobIdentity, JobRecord, JobVisibility

__all__ = ["EVENT_BUFFER", "QUEUED_PAGE", "JobManager", "progress_stage"]

logger = logging.getLogger("imagebridge.jobs")

JobKey = tuple[str, str]
"""(owner scope, job id): a job is only ever addressed together with its owner."""

EVENT_BUFFER = 16
"""Provider events buffered per job before the provider waits for progress to be recorded."""

QUEUED_PAGE = 500
"""Queued rows read per query while scheduling at start."""
_SHUTDOWN_REASON = "shutdown"
_CANCEL_REASON = CANCEL_REASON
_RECOVERY = "inspect_history_before_retrying"


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


def _stored_request(record: JobRecord, route: str | None = None) -> ImageRequest:
    """Blocking: the request a worker executes, read back from the durable row.

    ``route`` is the provider the shared queue routed the job to; a request that names no
    provider runs there, so the instance that claims it uses the submitter's choice.
    """
    request = job_view(record).request
    if route is None or request.routing.provider is not None:
        return request
    routing = request.routing.model_copy(update={"provider": route})
    return request.model_copy(update={"routing": routing})


class _ProgressRelay:
    """Turns one job's provider events into progress rows and previews, off the provider.

    Events pass through a small buffer to a single consumer task, so a provider only waits
    when progress falls :data:`EVENT_BUFFER` events behind. Events that arrive together are
    recorded together: one progress write with the latest stage and count, and only the
    newest preview decoded. Failures are logged, never raised.
    """

    def __init__(self, manager: JobManager, key: JobKey) -> None:
        self._manager = manager
        self._key = key
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
        manager, (scope, job_id) = self._manager, self._key
        partials = [event for event in events if isinstance(event, PartialImageEvent)]
        if partials:
            self.partial_images = min(self.partial_images + len(partials), 4_294_967_295)
            await manager._previews.offer(self._key, partials[-1])
        try:
            await manager._store.progress(
                scope,
                job_id,
                stage=progress_stage(events[-1]),
                partial_images=self.partial_images,
                now=manager._now(),
            )
        except BridgeError as error:
            logger.warning(
                "could not record durable job progress",
                extra={"job_id": job_id, "code": error.code.value},
            )


class JobManager:
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
    ) -> None:
        self._runtime = runtime
        self._store = store
        self._settings = settings or JobManagerSettings()
        self._clock = clock
        self._settle_timeout_s = settle_timeout_s
        self._queued_page = queued_page
        self._previews = PreviewCache(self._settings.partial_preview_max_bytes)
        self._queue: asyncio.Queue[JobKey] = asyncio.Queue()
        self._scheduled: set[JobKey] = set()
        self._tokens: dict[JobKey, CancelToken] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(self._settings.max_running)
        self._dispatcher: asyncio.Task[None] | None = None
        self._retention: asyncio.Task[None] | None = None
        self._pruner: asyncio.Task[None] | None = None
        self._prune_wanted = False
        self._retention_healthy = True
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
    def retention_healthy(self) -> bool:
        return self._retention_healthy

    @property
    def shared(self) -> bool:
        """Whether this manager shares its queue with other instances (shared mode)."""
        return self._shared is not None

    @property
    def instance_id(self) -> str:
        return self._instance_id

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
                self._retention_loop(), name="imagebridge-jobs-retention"
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

    async def _shutdown(self, timeout_s: float) -> None:
        self._stopping = True
        if self._shared is not None:
            await self._shared.stop_claiming()  # heartbeats go on while jobs drain
        for task in (self._dispatcher, self._retention):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            await self._drain(timeout_s)
        finally:
            if self._shared is not None:
                await self._shared.stop()
        if self._pruner is not None:
            await asyncio.gather(self._pruner, return_exceptions=True)

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
                token.cancel(_SHUTDOWN_REASON)
            _, pending = await asyncio.wait(pending, timeout=self._settle_timeout_s)
            for task in pending:  # left running: recovered at next start (or lease expiry)
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def healthy(self) -> bool:
        """Ready to take work: started, not stopping, retention working, store answering."""
        if not self._started or self._stopping or not self._retention_healthy:
            return False
        return await self._store.healthy()

    # -- retention ---------------------------------------------------------------------------

    async def run_retention(self) -> int:
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
            if self._retention_healthy:
                logger.error("durable job retention failed", extra={"code": error.code.value})
            self._retention_healthy = False
            raise
        self._retention_healthy = True
        return removed

    async def _retention_loop(self) -> None:
        period = self._settings.retention_period_s
        while True:
            await asyncio.sleep(period)
            try:
                await self.run_retention()
            except BridgeError:
                pass  # already logged and recorded as unhealthy
            except Exception:  # a store bug must not end the loop silently
                logger.exception("durable job retention failed unexpectedly")
                self._retention_healthy = False

    def _request_prune(self) -> None:
        """Prune soon; prunes requested while one runs collapse into one more run."""
        self._prune_wanted = True
        if self._pruner is None or self._pruner.done():
            self._pruner = asyncio.create_task(self._prune_pending(), name="imagebridge-prune")

    async def _prune_pending(self) -> None:
        while self._prune_wanted:
            self._prune_wanted = False
            with contextlib.suppress(BridgeError):
                await self.run_retention()

    # -- caller operations -------------------------------------------------------------------

    def _check_accepting(self) -> None:
        if self._stopping or self._runtime.shutting_down:
            raise BridgeError(
                ErrorCode.OVERLOADED,
                "durable job manager is shutting down",
                retryable=True,
            )
        if not self._retention_healthy:
            raise BridgeError(
                ErrorCode.OVERLOADED,
                "durable job retention is unhealthy",
                retryable=True,
            )

    async def submit(
        self, scope: str, request: ImageRequest, *, idempotency_key: str | None = None
    ) -> tuple[ImageJob, bool]:
        """Persist and schedule ``request``; returns the job and whether it was created.

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
        job_id = str(uuid7())
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
        record = await self._store.get(scope, job_id)
        return await asyncio.to_thread(job_view, record)

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
    ) -> ImageJobPage:
        """One page of the scope's history, newest first (``None``: the key was absent)."""
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

    # -- scheduling --------------------------------------------------------------------------

    def _schedule(self, key: JobKey) -> None:
        if key in self._scheduled:
            return
        self._scheduled.add(key)
        self._queue.put_nowait(key)

    async def _dispatch(self) -> None:
        """Hand queued jobs, in order, to at most ``max_running`` workers."""
        while True:
            await self._slots.acquire()
            try:
                key = await self._queue.get()
            except BaseException:
                self._slots.release()
                raise
            if self._stopping:
                self._slots.release()
                return
            task = asyncio.create_task(self._work(key), name="imagebridge-job")
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._work_done, key=key))

    def _work_done(self, task: asyncio.Task[None], key: JobKey) -> None:
        self._tasks.discard(task)
        self._scheduled.discard(key)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "durable job worker failed",
                exc_info=task.exception(),
                extra={"job_id": key[1]},
            )

    async def _work(self, key: JobKey) -> None:
        scope, job_id = key
        if self._stopping:
            return
        # Registered before the claim, so a cancel racing with the claim is never lost.
        token = CancelToken()
        self._tokens[key] = token
        try:
            try:
                claimed = await self._store.claim(scope, job_id, now=self._now())
            except BridgeError as error:
                logger.error(
                    "could not claim durable job",
                    extra={"job_id": job_id, "code": error.code.value},
                )
                return
            if not claimed:  # cancelled while queued, or already taken
                return
            await self._run_claimed(key, token, None)
        finally:
            self._tokens.pop(key, None)
        self._request_prune()

    def _launch_claimed(self, record: JobRecord) -> None:
        """Shared mode: run a job the store just gave this instance (its slot is held)."""
        key = (record.auth_scope, record.id)
        token = CancelToken()
        self._tokens[key] = token
        self._running_ids[record.id] = token
        task = asyncio.create_task(
            self._work_claimed(key, token, record.provider), name="imagebridge-job"
        )
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._work_done, key=key))

    async def _work_claimed(self, key: JobKey, token: CancelToken, route: str | None) -> None:
        try:
            await self._run_claimed(key, token, route)
        finally:
            self._tokens.pop(key, None)
            self._running_ids.pop(key[1], None)
        self._request_prune()

    async def _run_claimed(self, key: JobKey, token: CancelToken, route: str | None) -> None:
        self._previews.open(key)
        try:
            outcome = await self._execute(key, token, route)
        finally:
            self._previews.close(key)
            # Settled here: heartbeats stop renewing it while its outcome is written.
            self._running_ids.pop(key[1], None)
        await self._record(key, token, outcome)

    async def _execute(
        self, key: JobKey, token: CancelToken, route: str | None
    ) -> ImageResponse | BridgeError:
        scope, job_id = key
        try:
            record = await self._store.get(scope, job_id)
            if record.cancel_requested:
                token.cancel(_CANCEL_REASON)
            request = await asyncio.to_thread(_stored_request, record, route)
        except BridgeError as error:
            return error
        if token.cancelled:
            return BridgeError(ErrorCode.CANCELLED, "durable job was cancelled before it started")
        relay = _ProgressRelay(self, key)
        context = ExecutionContext(
            request_id=job_id,
            idempotency_scope=f"job:{job_id}",
            owner=scope,
            cancellation=token,
            events=relay.sink,
        )
        try:
            return await self._runtime.execute(request, context)
        except BridgeError as error:
            return error
        except Exception:
            logger.exception("durable job execution failed unexpectedly", extra={"job_id": job_id})
            return BridgeError(ErrorCode.INTERNAL, "durable job failed unexpectedly")
        finally:
            await relay.close()

    def _failure_status(self, token: CancelToken) -> ImageJobStatus:
        if token.cancelled:
            if token.reason == _SHUTDOWN_REASON:
                return ImageJobStatus.INTERRUPTED
            return ImageJobStatus.CANCELLED
        if self._runtime.shutting_down:
            return ImageJobStatus.INTERRUPTED
        return ImageJobStatus.FAILED

    async def _record(
        self, key: JobKey, token: CancelToken, outcome: ImageResponse | BridgeError
    ) -> None:
        scope, job_id = key
        if token.reason == LEASE_LOST_REASON:
            # Another instance already recorded the job interrupted: its row is final.
            logger.warning(
                "durable job outcome dropped after its lease was lost", extra={"job_id": job_id}
            )
            return
        if isinstance(outcome, ImageResponse):
            text, trimmed = await asyncio.to_thread(
                fit_result, outcome, self._store.max_result_bytes
            )
            if trimmed:
                logger.warning("durable job result trimmed to fit", extra={"job_id": job_id})
            try:
                await self._store.succeed(scope, job_id, text, now=self._now())
                return
            except BridgeError as refused:  # still too large: fail with the store's reason
                outcome = refused
            status = ImageJobStatus.FAILED
        else:
            status = self._failure_status(token)
        failure = outcome
        if status is ImageJobStatus.INTERRUPTED:
            failure = failure.copy().with_detail("recovery", _RECOVERY)
        try:
            await self._store.fail(scope, job_id, status, failure.to_dict(), now=self._now())
        except BridgeError as error:  # left running: the next start records it interrupted
            logger.error(
                "could not record durable job outcome",
                extra={"job_id": job_id, "code": error.code.value},
            )
