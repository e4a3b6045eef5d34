"""One claimed job: read its request back, run it through the runtime, record the outcome.

The request is read from the durable row (a job routed by the shared queue runs on the
route's provider when it names none). A key's job is charged on the key's quota when it
runs (:meth:`~imagebridge.keys.KeyService.charge`, without a concurrency slot). Provider
events become progress through :class:`~imagebridge.jobs.progress.ProgressRelay`. A result
is trimmed to the store's bound if needed; a failure is recorded ``cancelled``,
``interrupted`` (shutdown, with a recovery hint: its upstream call may have happened) or
``failed``. A job whose shared-mode lease was lost is left to the instance that recorded it
interrupted.

In shared mode the database may be away for a moment (a PostgreSQL restart): reading the
job and writing its outcome are retried, with a pause growing from ``retry_pause_s`` to
``retry_max_pause_s``, for up to ``retry_window_s`` (the lease: after it another instance
records the job interrupted anyway). Store calls are safe to repeat; the provider call is
never repeated. A write whose commit was lost with the connection is recognised on the
retry (the row already holds this outcome).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.crash_points import crash_point
from imagebridge.engine.publishing import ARTIFACT_NOT_STORED
from imagebridge.engine.runtime import ExecutionContext, ImageRuntime
from imagebridge.jobs.outcomes import OutcomeObserver, report_job_run
from imagebridge.jobs.previews import JobKey, PreviewCache
from imagebridge.jobs.progress import ProgressRelay
from imagebridge.jobs.shared_mode import CANCEL_REASON, LEASE_LOST_REASON
from imagebridge.jobs.store_retry import StoreRetry
from imagebridge.jobs.trimming import fit_result
from imagebridge.jobs.views import job_view
from imagebridge.keys import (
    KeyService,
    QuotaCharge,
    key_id_of_scope,
    scope_request_session,
    unscope_response_session,
)
from imagebridge.storage.interfaces import JobStore
from imagebridge.storage.records import JobRecord

__all__ = ["SHUTDOWN_REASON", "JobRunner"]

logger = logging.getLogger("imagebridge.jobs")

SHUTDOWN_REASON = "shutdown"
"""The cancel reason of a job still running when the manager's shutdown timeout ran out."""
_RECOVERY = "inspect_history_before_retrying"
T = TypeVar("T")


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


def _unstored_images(response: ImageResponse) -> BridgeError | None:
    """The failure of a job whose images storage refused (delivered inline by the engine)
    and whose result is too large to keep them inline in its row: they are lost, and the
    job says it ended that way instead of succeeding without them."""
    if ARTIFACT_NOT_STORED not in response.warnings:
        return None
    notes = [n for n in response.normalizations if n.reason.startswith("artifact_storage_")]
    reason = notes[0].reason.removeprefix("artifact_storage_") if notes else "no_space"
    return BridgeError(
        ErrorCode.ARTIFACT,
        "the job's images were generated but could not be stored, and are too large to "
        "keep in the job's result",
        details={
            "reason": reason,
            "storage": "artifacts",
            "outputs_not_stored": len(notes),
            "provider": response.provider,
        },
    )


class JobRunner:
    """Executes claimed jobs through the runtime and writes their outcomes to the store."""

    def __init__(
        self,
        runtime: ImageRuntime,
        store: JobStore,
        previews: PreviewCache,
        now: Callable[[], int],
        keys: KeyService | None = None,
        *,
        retry_window_s: float = 0.0,
        retry_pause_s: float = 0.5,
        retry_max_pause_s: float = 10.0,
        observer: OutcomeObserver | None = None,
    ) -> None:
        self._runtime = runtime
        self.observer = observer
        """Told every run's outcome (the server's metrics), when set."""
        self._store = store
        self._previews = previews
        self._now = now
        self._keys = keys
        self._retry_window_s = retry_window_s
        self._retry = StoreRetry(retry_window_s, retry_pause_s, retry_max_pause_s)

    async def _retrying(self, call: Callable[[], Awaitable[T]], job_id: str) -> T:
        return await self._retry.retrying(call, job_id)

    async def execute(
        self, key: JobKey, token: CancelToken, route: str | None
    ) -> ImageResponse | BridgeError:
        """The job's response, or the error it ended with (never raised)."""
        scope, job_id = key
        started = time.monotonic()
        try:
            record = await self._retrying(lambda: self._store.get(scope, job_id), job_id)
            if record.cancel_requested:
                token.cancel(CANCEL_REASON)
            request = await asyncio.to_thread(_stored_request, record, route)
        except BridgeError as error:
            return error
        if token.cancelled:
            cancelled = BridgeError(
                ErrorCode.CANCELLED, "durable job was cancelled before it started"
            )
            await self._count(record, request, cancelled, None, started)
            return cancelled
        relay = ProgressRelay(self._store, self._previews, key, self._now)
        context = ExecutionContext(
            request_id=job_id,
            idempotency_scope=f"job:{job_id}",
            owner=scope,
            cancellation=token,
            events=relay.sink,
        )
        key_id = key_id_of_scope(scope)
        if key_id is not None:  # a key's sessions live in its own namespace
            request = scope_request_session(request, key_id)
        outcome: ImageResponse | BridgeError
        ran = False
        key_name: str | None = None
        try:
            async with self._charged(key_id, request) as charge:
                ran = True
                key_name = charge.key.name if charge is not None else None
                outcome = await self._run(request, context, relay, job_id)
                if charge is not None:
                    charge.record(outcome)
        except BridgeError as refused:
            if ran:
                raise
            await relay.close()  # the key refused the job before it ran
            await self._count(record, request, refused, None, started)
            return refused
        await self._count(record, request, outcome, key_name, started)
        if key_id is not None and isinstance(outcome, ImageResponse):
            outcome = unscope_response_session(outcome, key_id)
        return outcome

    async def _run(
        self, request: ImageRequest, context: ExecutionContext, relay: ProgressRelay, job_id: str
    ) -> ImageResponse | BridgeError:
        try:
            return await self._runtime.execute(request, context)
        except BridgeError as error:
            return error
        except Exception:
            logger.exception("durable job execution failed unexpectedly", extra={"job_id": job_id})
            return BridgeError(ErrorCode.INTERNAL, "durable job failed unexpectedly")
        finally:
            await relay.close()

    @contextlib.asynccontextmanager
    async def _charged(
        self, key_id: str | None, request: ImageRequest
    ) -> AsyncIterator[QuotaCharge | None]:
        """A key's job is charged when it runs, not when it was queued (no slot: it
        waited in the job queue); a job of no key is not charged."""
        if key_id is None or self._keys is None:
            yield None
            return
        record = await self._keys.get(key_id)
        default = self._runtime.registry.default
        async with self._keys.charge(record, request, default_provider=default) as charge:
            yield charge

    async def _count(
        self,
        record: JobRecord,
        request: ImageRequest,
        outcome: ImageResponse | BridgeError,
        key_name: str | None,
        started: float,
    ) -> None:
        """Tell the observer how this run ended (jobs/outcomes.py)."""
        if self.observer is not None:
            await report_job_run(
                self.observer,
                record,
                request,
                outcome,
                key=key_name,
                keys=self._keys,
                default_provider=self._runtime.registry.default,
                seconds=time.monotonic() - started,
            )

    def _failure_status(self, token: CancelToken) -> ImageJobStatus:
        if token.cancelled:
            if token.reason == SHUTDOWN_REASON:
                return ImageJobStatus.INTERRUPTED
            return ImageJobStatus.CANCELLED
        if self._runtime.shutting_down:
            return ImageJobStatus.INTERRUPTED
        return ImageJobStatus.FAILED

    async def record(
        self, key: JobKey, token: CancelToken, outcome: ImageResponse | BridgeError
    ) -> None:
        """Write the job's final row (a refusal or store failure is logged, not raised)."""
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
            lost = _unstored_images(outcome) if trimmed else None
            if lost is not None:  # inline images dropped by the trim: say so, not "succeeded"
                outcome = lost
            else:
                crash_point("job.result_pending")  # artifacts published, the row not yet final
                try:
                    await self._write_outcome(
                        job_id,
                        ImageJobStatus.SUCCEEDED,
                        lambda: self._store.succeed(scope, job_id, text, now=self._now()),
                    )
                    return
                except BridgeError as refused:  # still too large: fail with the store's reason
                    if refused.retryable and self._retry_window_s > 0:  # stayed away
                        self._not_recorded(job_id, refused)
                        return
                    outcome = refused
            status = ImageJobStatus.FAILED
        else:
            status = self._failure_status(token)
        failure = outcome
        if status is ImageJobStatus.INTERRUPTED:
            failure = failure.copy().with_detail("recovery", _RECOVERY)
        error_body = failure.to_dict()
        try:
            await self._write_outcome(
                job_id,
                status,
                lambda: self._store.fail(scope, job_id, status, error_body, now=self._now()),
            )
        except BridgeError as error:
            self._not_recorded(job_id, error)

    async def _write_outcome(
        self, job_id: str, status: ImageJobStatus, write: Callable[[], Awaitable[object]]
    ) -> None:
        await self._retry.write_outcome(job_id, status, write)

    @staticmethod
    def _not_recorded(job_id: str, error: BridgeError) -> None:
        # Left running: the next start (or the lease's expiry) records it interrupted.
        logger.error(
            "could not record durable job outcome",
            extra={"job_id": job_id, "code": error.code.value},
        )
