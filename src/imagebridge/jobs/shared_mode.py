"""Shared mode: several bridge instances running one durable queue (issue 14).

In shared mode an instance never schedules job ids it was told about. It asks the store for
the oldest queued job routed to one of its providers (:meth:`SharedJobStore.claim_next`),
which marks the job ``running`` under a lease held by this instance; the claim is atomic,
so no job is ever run twice. Four loops keep that going:

* **claim**: whenever a worker slot is free, claim; when nothing is claimable, wait for a
  wake-up (a local submission, a ``queued`` notification) or ``poll_interval_s``;
* **heartbeat**: every ``heartbeat_secs``, renew the leases of the jobs running here. A
  renewal also reports which of them another instance asked to cancel, so a lost
  notification costs one heartbeat period at most; a job that was not renewed is no
  longer ours (its lease ran out) and its local work is stopped;
* **reaper**: every ``heartbeat_secs``, record ``interrupted`` the running jobs whose lease
  ran out (their instance died or lost the database); they are never re-run, because
  their provider call may have happened;
* **listener**: notifications from the store (``LISTEN``/``NOTIFY`` on PostgreSQL) wake the
  claim loop and deliver cancellations at once. If the subscription fails (the database
  restarted, the connection dropped) it is retried with a pause growing from
  ``poll_interval_s`` to ``heartbeat_secs``; polling and heartbeats keep everything correct
  meanwhile, and a new subscription is followed by a claim, for work queued in between.

:attr:`SharedQueue.connected` says whether the store answers right now: the listening
connection is up and the last claim worked. Readiness uses it, so a bridge whose database
went away says "not ready" within moments instead of at its next readiness probe.

Lease deadlines use each instance's clock: keep the clocks of instances that share a
database synchronised (NTP), well within ``lease_secs``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.cancellation import CancelToken
from imagebridge.jobs.tracing import JobTrace, claim_clock
from imagebridge.storage.interfaces import SharedJobStore
from imagebridge.storage.records import JobEvent, JobEventKind, JobRecord

__all__ = [
    "CANCEL_REASON",
    "LEASE_LOST_REASON",
    "SharedQueue",
    "SharedQueueConfigSection",
    "SharedQueueSettings",
    "default_instance_id",
]

logger = logging.getLogger("imagebridge.jobs")

CANCEL_REASON = "cancelled"
LEASE_LOST_REASON = "lease_lost"
"""Why local work stops when its lease was taken away: the row is already ``interrupted``."""

MAX_LEASE_SECS = 7 * 24 * 3600
MAX_HEARTBEAT_BATCH = 10_000
_HOST_CHARACTERS = re.compile(r"[^A-Za-z0-9.-]+")
_INSTANCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")


def default_instance_id() -> str:
    """``<hostname>-<pid>-<random>``: readable in diagnostics, unique per process."""
    host = _HOST_CHARACTERS.sub("-", socket.gethostname()).strip(".-")[:63] or "bridge"
    if not host[0].isalnum():  # pragma: no cover - stripped above
        host = f"h{host}"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


class SharedQueueConfigSection(Protocol):
    """The ``server.jobs`` keys shared mode needs (the config model satisfies it)."""

    @property
    def instance_id(self) -> str | None: ...
    @property
    def lease_secs(self) -> int: ...
    @property
    def heartbeat_secs(self) -> int: ...
    @property
    def poll_interval_ms(self) -> int: ...


@dataclass(frozen=True, slots=True)
class SharedQueueSettings:
    """This instance's identity and the timings of its leases (defaults are the config's)."""

    instance_id: str = field(default_factory=default_instance_id)
    lease_secs: int = 30
    """A claimed job stays this instance's for this long without a heartbeat."""
    heartbeat_secs: float = 10.0
    """How often leases are renewed and expired leases reaped."""
    poll_interval_s: float = 0.5
    """How long an idle claim loop waits for a wake-up before looking again."""

    def __post_init__(self) -> None:
        def refuse(name: str, rule: str) -> BridgeError:
            return BridgeError(
                ErrorCode.CONFIGURATION,
                f"shared job queue setting {name} {rule}",
                details={"field": f"server.jobs.{name}"},
            )

        if not isinstance(self.instance_id, str) or not _INSTANCE_ID.fullmatch(self.instance_id):
            raise refuse("instance_id", "must be 1-128 letters, digits or . _ : @ -")
        if (
            isinstance(self.lease_secs, bool)
            or not isinstance(self.lease_secs, int)
            or not 1 <= self.lease_secs <= MAX_LEASE_SECS
        ):
            raise refuse("lease_secs", "must be between 1 second and a week")
        for name in ("heartbeat_secs", "poll_interval_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise refuse(name, "must be positive")
        if self.heartbeat_secs * 2 > self.lease_secs:
            raise refuse("heartbeat_secs", "must be at most half of lease_secs")

    @classmethod
    def from_config(cls, section: SharedQueueConfigSection) -> SharedQueueSettings:
        return cls(
            instance_id=section.instance_id or default_instance_id(),
            lease_secs=section.lease_secs,
            heartbeat_secs=float(section.heartbeat_secs),
            poll_interval_s=section.poll_interval_ms / 1000,
        )


Launch = Callable[[JobRecord, JobTrace], None]
"""Starts local work on a job this instance just claimed (a worker slot is already held),
under the job's trace, begun with the claim."""


class SharedQueue:
    """The claim, heartbeat, reaper and listener loops of one instance.

    The owner (the job manager) provides the worker slots, a ``launch`` callback for
    claimed jobs and a view of the cancel tokens of the jobs running here, by job id.
    """

    def __init__(
        self,
        store: SharedJobStore,
        settings: SharedQueueSettings,
        *,
        providers: Sequence[str],
        slots: asyncio.Semaphore,
        launch: Launch,
        running: Callable[[], Mapping[str, CancelToken]],
        now: Callable[[], int],
    ) -> None:
        self._store = store
        self._settings = settings
        self._providers = sorted(set(providers))
        self._slots = slots
        self._launch = launch
        self._running = running
        self._now = now
        self._wake = asyncio.Event()
        self._closing = False
        self._late: JobRecord | None = None
        self._claims_failing = False
        self._claim_started = 0
        self._listening = False
        self._claimer: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._background: list[asyncio.Task[None]] = []

    @property
    def settings(self) -> SharedQueueSettings:
        return self._settings

    @property
    def instance_id(self) -> str:
        return self._settings.instance_id

    @property
    def connected(self) -> bool:
        """Whether the store answers: notifications are subscribed and claims work."""
        return self._listening and not self._claims_failing

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Reap leases that ran out while no instance was watching, then start the loops."""
        await self.reap_expired()
        self._claimer = asyncio.create_task(self._claim_loop(), name="imagebridge-jobs-claim")
        self._listener = asyncio.create_task(self._listen_loop(), name="imagebridge-jobs-listen")
        self._background = [
            asyncio.create_task(self._heartbeat_loop(), name="imagebridge-jobs-heartbeat"),
            asyncio.create_task(self._reaper_loop(), name="imagebridge-jobs-reaper"),
        ]

    async def stop_claiming(self) -> None:
        """Claim nothing more. A claim already in flight finishes, and its job is launched
        (so it runs during the drain instead of idling until its lease runs out)."""
        self._closing = True
        self._wake.set()
        tasks = [task for task in (self._claimer, self._listener) if task is not None]
        self._claimer = self._listener = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def stop(self) -> None:
        """Stop every loop: call after the local jobs have settled (heartbeats until then)."""
        await self.stop_claiming()
        tasks, self._background = self._background, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def wake(self) -> None:
        """Look for claimable work now (a job was just queued)."""
        self._wake.set()

    # -- claiming ----------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        while not self._closing:
            await self._slots.acquire()
            record: JobRecord | None = None
            try:
                record = await self._next_job()
            finally:
                late, self._late = self._late, None
                record = record or late
                if record is not None:
                    trace = JobTrace.claimed(
                        record.id, self._claim_started, instance=self.instance_id, shared=True
                    )
                    self._launch(record, trace)  # the slot now belongs to that job's worker
                else:
                    self._slots.release()

    async def _next_job(self) -> JobRecord | None:
        """Claim a job, waiting for wake-ups in between; ``None`` once closing."""
        poll = self._settings.poll_interval_s
        while not self._closing:
            self._wake.clear()
            record = await self._claim_once()
            if record is not None:
                return record
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll):
                    await self._wake.wait()
        return None

    async def _claim_once(self) -> JobRecord | None:
        self._claim_started = claim_clock()  # a claimed job's trace begins here
        claim = asyncio.ensure_future(
            self._store.claim_next(
                self.instance_id,
                self._providers,
                now=self._now(),
                lease_secs=self._settings.lease_secs,
            )
        )
        try:
            record = await asyncio.shield(claim)
        except asyncio.CancelledError:
            # The claim may commit anyway, and a job claimed here must run here.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                self._late = await claim
            raise
        except BridgeError as error:
            if not self._claims_failing:  # once per outage, not once per poll
                logger.warning("could not claim queued jobs", extra={"code": error.code.value})
            self._claims_failing = True
            return None
        if self._claims_failing:
            logger.info("claiming queued jobs works again")
            self._claims_failing = False
        return record

    # -- leases ------------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self._settings.heartbeat_secs)
            try:
                await self.heartbeat()
            except Exception:  # a store bug must not end the loop silently
                logger.exception("durable job heartbeat failed unexpectedly")

    async def heartbeat(self) -> None:
        """Renew the leases of the jobs running here; stop those cancelled or lost."""
        running = dict(self._running())
        ids = sorted(running)
        for start in range(0, len(ids), MAX_HEARTBEAT_BATCH):
            batch = ids[start : start + MAX_HEARTBEAT_BATCH]
            try:
                renewal = await self._store.heartbeat(
                    self.instance_id,
                    batch,
                    now=self._now(),
                    lease_secs=self._settings.lease_secs,
                )
            except BridgeError as error:
                logger.warning(
                    "could not renew durable job leases", extra={"code": error.code.value}
                )
                continue
            for job_id in renewal.cancel_requested:
                running[job_id].cancel(CANCEL_REASON)
            for job_id in set(batch) - renewal.renewed:
                if self._running().get(job_id) is running[job_id]:  # still working on it
                    logger.warning(
                        "durable job lease was lost; its work here stops",
                        extra={"job_id": job_id},
                    )
                    running[job_id].cancel(LEASE_LOST_REASON)

    async def _reaper_loop(self) -> None:
        while True:
            await asyncio.sleep(self._settings.heartbeat_secs)
            try:
                await self.reap_expired()
            except Exception:
                logger.exception("durable job lease expiry failed unexpectedly")

    async def reap_expired(self) -> int:
        """Record ``interrupted`` every running job whose lease ran out (any instance's)."""
        try:
            expired = await self._store.expire_leases(now=self._now())
        except BridgeError as error:
            logger.warning("could not expire durable job leases", extra={"code": error.code.value})
            return 0
        if expired:
            logger.warning(
                "durable jobs interrupted after their instance stopped renewing its leases",
                extra={"count": expired},
            )
        return expired

    # -- notifications -----------------------------------------------------------------------

    async def notify(self, kind: JobEventKind, job_id: str) -> None:
        """Tell the other instances; best effort (they also poll and heartbeat)."""
        try:
            await self._store.notify_job_event(kind, job_id)
        except BridgeError as error:
            logger.warning(
                "could not notify other bridge instances",
                extra={"job_id": job_id, "code": error.code.value},
            )

    def _handle(self, event: JobEvent) -> None:
        if event.kind is JobEventKind.QUEUED:
            self._wake.set()
        elif event.kind is JobEventKind.CANCEL_REQUESTED:
            token = self._running().get(event.job_id)
            if token is not None:
                token.cancel(CANCEL_REASON)

    async def _listen_loop(self) -> None:
        first = self._settings.poll_interval_s
        longest = max(first, self._settings.heartbeat_secs)
        pause = first
        failing = False
        while True:
            try:
                async with self._store.subscribe() as events:
                    pause = first
                    self._listening = True
                    if failing:
                        logger.info("job notifications resumed")
                    failing = False
                    self._wake.set()  # anything queued while we were not listening
                    async for event in events:
                        self._handle(event)
            except BridgeError as error:
                if not failing:  # once per outage, not once per attempt
                    logger.warning(
                        "job notifications were interrupted; polling until they resume",
                        extra={"code": error.code.value},
                    )
                failing = True
            except Exception:
                logger.exception("job notifications failed unexpectedly")
                failing = True
            finally:
                self._listening = False
            await asyncio.sleep(pause)
            pause = min(pause * 2, longest)
