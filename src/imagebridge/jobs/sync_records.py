"""Synchronous requests in the job history: their records, and the retries that join them.

A synchronous image request (``POST /v1/images``, ``/v1/images/stream``, the
OpenAI-compatible routes) runs in-process, in the HTTP request that asked for it, yet it
leaves the record a job leaves: a row of the jobs table with its ``origin``, ``running``
from the start (nothing queues it), then finished with its result (each image as the
artifact it was kept as) or its error. So history, ownership, quota and usage read one
record whatever surface started the work (docs/api-decisions.md, "Paid work is kept").

A retry finds the record it repeats instead of paying again:

* with an ``Idempotency-Key``: :meth:`SyncRecords.begin` inserts the record or finds the
  one the key already names (the unique index decides, across instances on PostgreSQL);
  the same key with another request is 409 ``idempotency_conflict``;
* without one, when marked as a retry: :meth:`SyncRecords.find_retry` finds the newest
  record of the same owner, surface and request fingerprint started within
  ``retry_join_window_s``.

How a found record is answered is :func:`join_state`'s: one still running is waited for
(:meth:`SyncRecords.wait`: in-process when it runs here, else by reading the row every
``join_poll_s`` within the waiter's deadline), a finished one answers with its images, one
whose provider may have run but failed answers with its error (never a second call), and
one that ended before anything was paid for (cancelled before its provider call, or a
known failure) lets the retry run on its own.

A record runs under the same rules as a claimed job: ``DELETE /v1/jobs/{id}`` cancels it
(its :attr:`SyncLead.token`), in shared mode it is held under this instance's lease and
renewed by its heartbeat (another instance records it ``interrupted`` if this one dies), and
a single instance's restart records a record left ``running`` ``interrupted``. Its outcome
is written as a job's is: retried while the store is away, within the job outcome's window.
Unlike a job's, its provider events are not written as progress (its caller, or its stream,
gets them): a synchronous request costs the database two writes, its start and its end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.keep import KeptImages
from imagebridge.imaging.ids import uuid7
from imagebridge.jobs.previews import JobKey
from imagebridge.jobs.shared_mode import CANCEL_REASON, LEASE_LOST_REASON
from imagebridge.jobs.store_retry import StoreRetry
from imagebridge.jobs.sync_shapes import kept_result, record_request, request_identity
from imagebridge.jobs.trimming import fit_result, result_text
from imagebridge.storage.interfaces import JobStore
from imagebridge.storage.records import JobOrigin, JobRecord

__all__ = [
    "JoinState",
    "SyncLead",
    "SyncOutcome",
    "SyncRecordSettings",
    "SyncRecords",
    "SyncRequest",
    "join_state",
    "record_error",
]

logger = logging.getLogger("imagebridge.jobs")

_RECOVERY = "inspect_history_before_retrying"
_INLINE_WORK = 64 * 1024
"""Requests whose inline inputs exceed this are prepared in a worker thread."""


@dataclass(frozen=True, slots=True)
class SyncRecordSettings:
    """``[server.sync]`` as plain values (the job manager never reads configuration)."""

    retry_join_window_s: int = 900
    """How old a record may be for a marked retry without a key to join it (0: never)."""
    join_poll_s: float = 0.25
    """How often a retry waiting for a record running on another instance reads it."""

    def __post_init__(self) -> None:
        window, poll = self.retry_join_window_s, self.join_poll_s
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "retry join window must be zero or more seconds",
                details={"field": "server.sync.retry_join_window_secs"},
            )
        if isinstance(poll, bool) or not isinstance(poll, int | float) or not poll > 0:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "join poll interval must be positive",
                details={"field": "server.sync.join_poll_ms"},
            )


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """A request ready to be recorded: what its record stores, and what identifies it."""

    request: ImageRequest
    origin: JobOrigin
    stored: dict[str, Any]
    fingerprint: str

    @property
    def prompt(self) -> str:
        return self.request.prompt


@dataclass(slots=True)
class SyncOutcome:
    """How a record ended, as a retry waiting for it sees it."""

    record: JobRecord
    response: ImageResponse | None = None
    """The answer its own request got, when it ran in this process (answered directly,
    without reading the kept images back)."""


class JoinState(Enum):
    """What a retry does with the record it repeats."""

    WAIT = "wait"
    """Still running: wait for it."""
    ANSWER = "answer"
    """Finished with images: answer them."""
    FAIL = "fail"
    """Failed after its provider may have run: answer its error (never a second call)."""
    RUN = "run"
    """Ended before anything was paid for: the retry runs on its own."""


def record_error(record: JobRecord) -> BridgeError:
    """The error a failed, cancelled or interrupted record ended with."""
    body = record.error()
    error = (
        BridgeError.from_dict(body)
        if body is not None
        else BridgeError(ErrorCode.INTERNAL, "the request it repeats failed")
    )
    if record.status is ImageJobStatus.INTERRUPTED:
        error.mark_unknown_outcome()
    return error


def join_state(record: JobRecord) -> JoinState:
    """What a retry of ``record``'s request does (see the module docstring)."""
    status = record.status
    if status in (ImageJobStatus.QUEUED, ImageJobStatus.RUNNING):
        return JoinState.WAIT
    if status is ImageJobStatus.SUCCEEDED:
        return JoinState.ANSWER
    if status is ImageJobStatus.INTERRUPTED or record_error(record).outcome_unknown:
        return JoinState.FAIL
    return JoinState.RUN


def _prepare(request: ImageRequest, origin: JobOrigin) -> SyncRequest:
    return SyncRequest(request, origin, record_request(request), request_identity(request))


def _inline_bytes(request: ImageRequest) -> int:
    return sum(len(item.payload) for _, item in request.all_inputs())


class SyncLead:
    """A record this process runs: finish it once with :meth:`SyncRecords.finish`."""

    def __init__(self, record: JobRecord) -> None:
        self.record = record
        self.token = CancelToken()
        """Cancelled by ``DELETE /v1/jobs/{id}`` (``cancelled``) or when this instance's
        lease on the record was lost (``lease_lost``: the row is final elsewhere)."""
        self.settled: asyncio.Future[SyncOutcome] = asyncio.get_running_loop().create_future()
        self.finished = False

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def key(self) -> JobKey:
        return (self.record.auth_scope, self.record.id)


@dataclass(slots=True)
class _Registry:
    """Where the job manager keeps what runs in this process, by job id."""

    tokens: MutableMapping[JobKey, CancelToken]
    running: MutableMapping[str, CancelToken]
    leads: dict[str, SyncLead] = field(default_factory=dict)


class SyncRecords:
    """Records of synchronous requests and the joining of their retries (module docstring).

    The job manager owns it: it shares the manager's store, the cancel tokens
    ``DELETE /v1/jobs/{id}`` reaches, and (in shared mode) the ids its heartbeat renews;
    ``lease`` is ``(instance id, lease_secs)`` in shared mode.
    """

    def __init__(
        self,
        store: JobStore,
        settings: SyncRecordSettings,
        *,
        now: Callable[[], int],
        tokens: MutableMapping[JobKey, CancelToken],
        running: MutableMapping[str, CancelToken],
        shutting_down: Callable[[], bool],
        lease: tuple[str, int] | None = None,
        retry: StoreRetry | None = None,
    ) -> None:
        self._store = store
        self.settings = settings
        self._now = now
        self._registry = _Registry(tokens, running)
        self._shutting_down = shutting_down
        self._lease = lease
        self._retry = retry or StoreRetry()

    # -- preparing and finding -----------------------------------------------------------

    async def prepare(self, request: ImageRequest, origin: JobOrigin) -> SyncRequest:
        """The request as its record stores it, and its fingerprint (a large request's
        inline images are hashed in a worker thread)."""
        if _inline_bytes(request) > _INLINE_WORK:
            return await asyncio.to_thread(_prepare, request, origin)
        return _prepare(request, origin)

    async def find_retry(self, scope: str, prepared: SyncRequest) -> JobRecord | None:
        """The record a marked retry repeats: the newest of ``scope`` from the same surface
        with the same fingerprint, within the window, that it may join (not one that ended
        before anything was paid for). ``None``: run on its own."""
        window = self.settings.retry_join_window_s
        if window <= 0:
            return None
        since = max(0, self._now() - window)
        found = await self._store.find_retry(
            scope, prepared.origin, prepared.fingerprint, since=since
        )
        if found is None or join_state(found) is JoinState.RUN:
            return None
        return found

    async def get(self, scope: str, record_id: str) -> JobRecord:
        return await self._store.get(scope, record_id)

    # -- leading -------------------------------------------------------------------------

    async def begin(
        self, scope: str, prepared: SyncRequest, *, key: str | None = None
    ) -> SyncLead | JobRecord:
        """Record the request as running here (a :class:`SyncLead`), or — with a ``key``
        another request already used for this request — that request's record."""
        result = await self._store.open_record(
            scope,
            str(uuid7()),
            prepared.stored,
            prepared.prompt,
            origin=prepared.origin,
            fingerprint=prepared.fingerprint,
            sync_key=key,
            now=self._now(),
            lease=self._lease,
        )
        if not result.created:
            return result.job
        record = result.job
        job_key = (record.auth_scope, record.id)
        lead = SyncLead(record)
        registry = self._registry
        registry.tokens[job_key] = lead.token
        if self._lease is not None:
            registry.running[record.id] = lead.token
        registry.leads[record.id] = lead
        return lead

    def answered(self, lead: SyncLead, response: ImageResponse) -> None:
        """The lead's engine call succeeded: retries waiting for it in this process get
        ``response`` now, before its kept images and its record are written
        (:meth:`finish`, once the caller has its answer)."""
        if not lead.settled.done():
            done = replace(lead.record, status=ImageJobStatus.SUCCEEDED)
            lead.settled.set_result(SyncOutcome(done, response))

    async def finish(
        self,
        lead: SyncLead,
        outcome: ImageResponse | BridgeError,
        *,
        kept: KeptImages | None = None,
    ) -> None:
        """Write the record's outcome (once; a store failure is logged, never raised) and
        wake every retry waiting for it here."""
        if lead.finished:
            return
        lead.finished = True
        record = lead.record
        try:
            if lead.token.reason == LEASE_LOST_REASON:
                logger.warning(
                    "synchronous record outcome dropped after its lease was lost",
                    extra={"job_id": record.id},
                )
            else:
                await self._write(lead, outcome, kept)
        finally:
            self._release(lead)
            if not lead.settled.done():  # waiters here: the outcome as it was written
                if isinstance(outcome, ImageResponse):
                    done = replace(record, status=ImageJobStatus.SUCCEEDED)
                    lead.settled.set_result(SyncOutcome(done, outcome))
                else:
                    lead.settled.set_result(SyncOutcome(_failed_copy(record, outcome)))

    async def _write(
        self, lead: SyncLead, outcome: ImageResponse | BridgeError, kept: KeptImages | None
    ) -> None:
        record = lead.record
        scope, record_id = record.auth_scope, record.id
        store = self._store
        try:
            if isinstance(outcome, ImageResponse):
                text, trimmed = await asyncio.to_thread(
                    _result_text, outcome, kept, store.max_result_bytes
                )
                if trimmed:
                    logger.warning(
                        "synchronous record result trimmed to fit", extra={"job_id": record_id}
                    )
                status = ImageJobStatus.SUCCEEDED
                await self._retry.write_outcome(
                    record_id,
                    status,
                    lambda: store.succeed(scope, record_id, text, now=self._now()),
                )
            else:
                status, failure = self._failure(lead, outcome)
                body = failure.to_dict()
                forget = not failure.outcome_unknown and status is not ImageJobStatus.INTERRUPTED
                await self._retry.write_outcome(
                    record_id,
                    status,
                    lambda: store.fail(
                        scope, record_id, status, body, now=self._now(), forget_key=forget
                    ),
                )
        except BridgeError as error:
            # Left running: a restart (or another instance, once the lease runs out)
            # records it interrupted.
            logger.error(
                "could not record a synchronous request's outcome",
                extra={"job_id": record_id, "code": error.code.value},
            )

    def _failure(self, lead: SyncLead, error: BridgeError) -> tuple[ImageJobStatus, BridgeError]:
        if lead.token.reason == CANCEL_REASON:
            return ImageJobStatus.CANCELLED, error
        if self._shutting_down() and error.code is ErrorCode.CANCELLED:
            return ImageJobStatus.INTERRUPTED, error.copy().with_detail("recovery", _RECOVERY)
        if error.code is ErrorCode.CANCELLED:
            return ImageJobStatus.CANCELLED, error
        return ImageJobStatus.FAILED, error

    def _release(self, lead: SyncLead) -> None:
        registry = self._registry
        key = lead.key
        if registry.tokens.get(key) is lead.token:
            del registry.tokens[key]
        if registry.running.get(lead.id) is lead.token:
            del registry.running[lead.id]
        registry.leads.pop(lead.id, None)

    # -- waiting -------------------------------------------------------------------------

    async def wait(
        self, scope: str, record_id: str, deadline: Deadline, cancellation: CancelToken
    ) -> SyncOutcome:
        """The record once it has ended: awaited in-process when it runs here, else read
        every ``join_poll_s``. Bounded by ``deadline`` (504 ``timeout``) and the waiter's
        own ``cancellation`` (``cancelled``)."""
        lead = self._registry.leads.get(record_id)
        if lead is not None and lead.record.auth_scope == scope:
            return await _bounded(asyncio.shield(lead.settled), deadline, cancellation)
        return await _bounded(self._poll(scope, record_id), deadline, cancellation)

    async def _poll(self, scope: str, record_id: str) -> SyncOutcome:
        pause = self.settings.join_poll_s
        while True:
            lead = self._registry.leads.get(record_id)
            if lead is not None:  # it started here after all (a keyed race)
                return await asyncio.shield(lead.settled)
            try:
                record = await self._store.get(scope, record_id)
            except BridgeError as error:
                if not error.retryable:
                    raise
                record = None  # the database is away for a moment: read again
            if record is not None and record.terminal:
                return SyncOutcome(record)
            await asyncio.sleep(pause)


def _result_text(
    response: ImageResponse, kept: KeptImages | None, max_bytes: int
) -> tuple[str, bool]:
    return fit_result(kept_result(response, kept), max_bytes)


def _failed_copy(record: JobRecord, error: BridgeError) -> JobRecord:
    """What a waiter in this process sees of a failed record: its error."""
    status = ImageJobStatus.FAILED
    if error.code is ErrorCode.CANCELLED and not error.outcome_unknown:
        status = ImageJobStatus.CANCELLED
    return replace(record, status=status, error_json=result_text(error.to_dict()))


async def _bounded(
    waiting: Awaitable[SyncOutcome], deadline: Deadline, cancellation: CancelToken
) -> SyncOutcome:
    """``waiting``'s result, unless the deadline passes or the waiter is cancelled first."""
    task: asyncio.Future[SyncOutcome] = asyncio.ensure_future(waiting)
    cancelled: asyncio.Future[None] = asyncio.ensure_future(cancellation.wait())
    watched: set[asyncio.Future[Any]] = {task, cancelled}
    try:
        await asyncio.wait(
            watched, timeout=deadline.remaining(), return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        cancelled.cancel()
    if task.done():
        return task.result()
    task.cancel()
    if cancellation.cancelled:
        raise BridgeError(
            ErrorCode.CANCELLED, "request was cancelled while waiting for the generation it repeats"
        )
    raise BridgeError(
        ErrorCode.TIMEOUT, "request deadline elapsed while waiting for the generation it repeats"
    )
