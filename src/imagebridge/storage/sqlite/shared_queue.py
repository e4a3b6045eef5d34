"""The shared job queue of issue 14 on SQLite: :class:`SqliteSharedJobStore`.

Several bridge instances may share one job store. The primitives (``claim_next``, leases with
heartbeats, ``expire_leases``, ``instance_counts``, job notifications) were introduced with the
PostgreSQL backend; :class:`SqliteSharedJobStore` gives single-host SQLite deployments the same
API, so the job manager has one code path whatever the backend. The queue's rules and its
notification codec are backend-neutral, in :mod:`imagebridge.storage.rules.queue`.

SQLite notes: the shared-queue state lives in side tables of the jobs database with their own
migrations table (``job_queue_schema_migrations``), so the job schema itself is unchanged and a
plain :class:`~imagebridge.storage.sqlite.jobs.SqliteJobStore` can still open the same file.
Claims are single-writer transactions (``BEGIN IMMEDIATE``), and notifications are rows that
subscribers poll, so they cross process boundaries too, with the poll interval as their latency.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import replace
from typing import Any, Self

from imagebridge.contract.errors import BridgeError
from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS, JOB_STORE
from imagebridge.storage.records import (
    CreateResult,
    JobEvent,
    JobEventKind,
    JobRecord,
    JsonInput,
    LeaseRenewal,
)
from imagebridge.storage.rows import counts_by_name, lease_renewal
from imagebridge.storage.rules.jobs import (
    MAX_ERROR_JSON_BYTES,
    MAX_RESULT_JSON_BYTES,
    check_job_id,
    prepare_interruption,
)
from imagebridge.storage.rules.queue import (
    UNROUTED,
    check_claim,
    check_event_kind,
    check_heartbeat,
    check_provider,
    check_record_lease,
    job_event,
)
from imagebridge.storage.rules.schema import Migration, StoreSchema
from imagebridge.storage.rules.values import check_count, check_timestamp
from imagebridge.storage.sqlite.database import SqliteDatabase
from imagebridge.storage.sqlite.jobs import SqliteJobStore
from imagebridge.storage.sqlite.queries import immediate, run_for_ids

__all__ = [
    "DEFAULT_EVENT_POLL_INTERVAL_S",
    "DEFAULT_RETAINED_EVENTS",
    "QUEUE_SCHEMA",
    "SqliteSharedJobStore",
]

DEFAULT_EVENT_POLL_INTERVAL_S = 0.5
"""How often a SQLite subscriber looks for new notifications."""

DEFAULT_RETAINED_EVENTS = 10_000
"""Notification rows a SQLite store keeps; older ones are trimmed as new ones arrive."""

_ROUTE_GRACE_SECS = 3_600
"""Age after which a route row without its job (a crash mid-submission, a pruned job) goes."""

_CHUNK = 500


# -- schema ----------------------------------------------------------------------------------


def _migrate_queue_v1(conn: sqlite3.Connection, recorded: bool) -> None:
    """Routes and leases beside ``image_jobs``, and the notification rows."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS job_queue ("
        "job_id TEXT PRIMARY KEY NOT NULL, "
        "provider TEXT, "
        "lease_owner TEXT, "
        "lease_expires_at INTEGER, "
        "registered_at INTEGER NOT NULL)"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS job_queue_owner_idx ON job_queue (lease_owner) "
        "WHERE lease_owner IS NOT NULL"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS job_queue_events ("
        "seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "kind TEXT NOT NULL, "
        "job_id TEXT NOT NULL)"
    )


QUEUE_SCHEMA = StoreSchema(
    recorded_as="job_queue_schema_migrations",
    migrations=(Migration(1, _migrate_queue_v1),),
)


def _placeholders(count: int) -> str:
    return ", ".join("?" for _ in range(count))


def _chunks(values: Sequence[str]) -> builtins.list[Sequence[str]]:
    return [values[start : start + _CHUNK] for start in range(0, len(values), _CHUNK)]


class SqliteSharedJobStore(SqliteJobStore):
    """:class:`~imagebridge.storage.interfaces.SharedJobStore` over one SQLite file.

    Every :class:`SqliteJobStore` behaviour is unchanged; ``create`` additionally records the
    job's provider. A job with no recorded provider (written by a plain store or before the
    queue tables existed) may be claimed by any instance, so no queued job is ever stranded.
    """

    _event_poll_interval_s: float = DEFAULT_EVENT_POLL_INTERVAL_S
    _retained_events: int = DEFAULT_RETAINED_EVENTS

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        max_result_bytes: int = MAX_RESULT_JSON_BYTES,
        max_error_bytes: int = MAX_ERROR_JSON_BYTES,
        event_poll_interval_s: float = DEFAULT_EVENT_POLL_INTERVAL_S,
        retained_events: int = DEFAULT_RETAINED_EVENTS,
    ) -> Self:
        """Open the jobs database at ``path`` and add the shared-queue tables when absent."""
        if (
            isinstance(event_poll_interval_s, bool)
            or not isinstance(event_poll_interval_s, int | float)
            or not 0.001 <= event_poll_interval_s <= 60
        ):
            raise BridgeError(JOB_STORE.code, "event_poll_interval_s must be between 0.001 and 60")
        if check_count(retained_events, "retained_events") < 1:
            raise BridgeError(JOB_STORE.code, "retained_events must be at least 1")
        store = await super().open(
            path,
            busy_timeout_ms=busy_timeout_ms,
            max_result_bytes=max_result_bytes,
            max_error_bytes=max_error_bytes,
        )
        try:
            # A short-lived second handle applies the queue migrations through the public
            # migration machinery; the store's own connection serves every call afterwards.
            queue_db = await SqliteDatabase.open(
                path,
                store_schema=QUEUE_SCHEMA,
                code=JOB_STORE.code,
                label=JOB_STORE.label,
                busy_timeout_ms=busy_timeout_ms,
            )
            await queue_db.close()
        except BaseException:
            await store.close()
            raise
        store._event_poll_interval_s = float(event_poll_interval_s)
        store._retained_events = retained_events
        return store

    # -- submission --------------------------------------------------------------------------

    async def create(
        self,
        scope: str,
        job_id: str,
        request_json: JsonInput,
        prompt: str,
        *,
        submission_key: str | None = None,
        fingerprint: str | None = None,
        now: int,
        max_pending: int,
        max_database_bytes: int,
        provider: str | None = None,
    ) -> CreateResult:
        """As :meth:`SqliteJobStore.create`, recording ``provider`` for :meth:`claim_next`.

        The route row is written first and the job row second, so a job is never visible
        without its route; a refused or replayed submission removes the route again.
        """
        checked = None if provider is None else check_provider(provider)
        check_job_id(job_id)
        check_timestamp(now)
        registered = False
        if checked is not None:
            route: str = checked
            registered = await self._db.run(
                lambda conn: self._register_route(conn, job_id, route, now)
            )
        try:
            result = await super().create(
                scope,
                job_id,
                request_json,
                prompt,
                submission_key=submission_key,
                fingerprint=fingerprint,
                now=now,
                max_pending=max_pending,
                max_database_bytes=max_database_bytes,
            )
        except BaseException:
            if registered:
                await self._db.run(lambda conn: self._drop_route_without_job(conn, job_id))
            raise
        if registered and not result.created:
            await self._db.run(lambda conn: self._drop_route_without_job(conn, job_id))
        return result

    @staticmethod
    def _register_route(conn: sqlite3.Connection, job_id: str, provider: str, now: int) -> bool:
        with immediate(conn):
            if conn.execute("SELECT 1 FROM image_jobs WHERE id = ?", (job_id,)).fetchone():
                return False  # the id is taken: the create that follows refuses it
            conn.execute(
                "INSERT INTO job_queue (job_id, provider, lease_owner, lease_expires_at, "
                "registered_at) VALUES (?, ?, NULL, NULL, ?) ON CONFLICT (job_id) DO UPDATE SET "
                "provider = excluded.provider, lease_owner = NULL, lease_expires_at = NULL, "
                "registered_at = excluded.registered_at",
                (job_id, provider, now),
            )
            return True

    @staticmethod
    def _drop_route_without_job(conn: sqlite3.Connection, job_id: str) -> None:
        # Calls run one at a time on the store's worker thread, so the create this undoes
        # has finished (committed or not) before this check runs.
        conn.execute(
            "DELETE FROM job_queue WHERE job_id = ? "
            "AND NOT EXISTS (SELECT 1 FROM image_jobs WHERE id = job_queue.job_id)",
            (job_id,),
        )

    def _lease_record(
        self, conn: sqlite3.Connection, record_id: str, lease: tuple[str, int] | None, now: int
    ) -> None:
        """A synchronous record runs under its instance's lease, as a claimed job does, so
        another instance records it ``interrupted`` once its instance stops renewing it."""
        if lease is None:
            return
        owner, deadline = check_record_lease(lease, now)
        conn.execute(
            "INSERT INTO job_queue (job_id, provider, lease_owner, lease_expires_at, "
            "registered_at) VALUES (?, NULL, ?, ?, ?) ON CONFLICT (job_id) DO UPDATE SET "
            "lease_owner = excluded.lease_owner, lease_expires_at = excluded.lease_expires_at",
            (record_id, owner, deadline, now),
        )

    # -- claiming and leases -----------------------------------------------------------------

    async def claim_next(
        self, instance_id: str, providers: Sequence[str], *, now: int, lease_secs: int
    ) -> JobRecord | None:
        """Claim the oldest claimable queued job for one of ``providers`` under a lease.

        Claimable: queued, not cancel-requested, routed to one of ``providers`` or to no
        recorded provider. The job becomes ``running`` at stage ``starting`` (as with
        :meth:`claim`), owned by ``instance_id`` until ``now + lease_secs`` unless renewed.
        Returns ``None`` when nothing is claimable (always, for an empty ``providers``).
        """
        owner, wanted, deadline = check_claim(
            instance_id, providers, now=now, lease_secs=lease_secs
        )
        if not wanted:
            return None

        def operation(conn: sqlite3.Connection) -> tuple[str, str, str | None] | None:
            with immediate(conn):
                row = conn.execute(
                    "SELECT j.auth_scope, j.id, q.provider FROM image_jobs AS j "  # noqa: S608
                    "LEFT JOIN job_queue AS q ON q.job_id = j.id "
                    "WHERE j.status = 'queued' AND j.cancel_requested = 0 "
                    f"AND (q.provider IS NULL OR q.provider IN ({_placeholders(len(wanted))})) "
                    "ORDER BY j.created_at, j.id LIMIT 1",
                    wanted,
                ).fetchone()
                if row is None:
                    return None
                scope, job_id, route = str(row[0]), str(row[1]), row[2]
                conn.execute(
                    "UPDATE image_jobs SET status = 'running', progress_stage = 'starting', "
                    "started_at = MAX(?, updated_at), updated_at = MAX(?, updated_at) "
                    "WHERE id = ? AND status = 'queued'",
                    (now, now, job_id),
                )
                conn.execute(
                    "INSERT INTO job_queue (job_id, provider, lease_owner, lease_expires_at, "
                    "registered_at) VALUES (?, NULL, ?, ?, ?) ON CONFLICT (job_id) DO UPDATE "
                    "SET lease_owner = excluded.lease_owner, "
                    "lease_expires_at = excluded.lease_expires_at",
                    (job_id, owner, deadline, now),
                )
                return scope, job_id, None if route is None else str(route)

        claimed = await self._db.run(operation)
        if claimed is None:
            return None
        scope, job_id, route = claimed
        return replace(await self.get(scope, job_id), provider=route)

    async def heartbeat(
        self, instance_id: str, job_ids: Sequence[str], *, now: int, lease_secs: int
    ) -> LeaseRenewal:
        """Extend this instance's leases on the running jobs among ``job_ids``.

        A lease never moves backwards. A job that is no longer running under this instance
        (finished, or expired into ``interrupted``) is simply not renewed.
        """
        owner, ids, deadline = check_heartbeat(instance_id, job_ids, now=now, lease_secs=lease_secs)

        def operation(conn: sqlite3.Connection) -> LeaseRenewal:
            renewed: builtins.list[Any] = []
            with immediate(conn):
                for chunk in _chunks(ids):
                    marks = _placeholders(len(chunk))
                    rows = conn.execute(
                        "SELECT q.job_id, j.cancel_requested FROM job_queue AS q "  # noqa: S608
                        "JOIN image_jobs AS j ON j.id = q.job_id "
                        "WHERE q.lease_owner = ? AND j.status = 'running' "
                        f"AND q.job_id IN ({marks})",
                        (owner, *chunk),
                    ).fetchall()
                    renewed.extend(rows)
                    run_for_ids(
                        conn,
                        "UPDATE job_queue SET lease_expires_at = "
                        "MAX(COALESCE(lease_expires_at, 0), :deadline) WHERE job_id IN ({ids})",
                        [str(row[0]) for row in rows],
                        {"deadline": deadline},
                    )
            return lease_renewal(renewed)

        return await self._db.run(operation)

    async def expire_leases(self, *, now: int) -> int:
        """Mark running jobs whose lease ran out at or before ``now`` as ``interrupted``.

        They carry the same error as :meth:`recover_interrupted` and are never run again;
        jobs claimed without a lease (plain :meth:`claim`) are left to that recovery.
        """
        error_text = prepare_interruption(now)

        def operation(conn: sqlite3.Connection) -> int:
            with immediate(conn):
                ids = [
                    str(row[0])
                    for row in conn.execute(
                        "SELECT j.id FROM image_jobs AS j JOIN job_queue AS q ON q.job_id = j.id "
                        "WHERE j.status = 'running' AND q.lease_expires_at IS NOT NULL "
                        "AND q.lease_expires_at <= ?",
                        (now,),
                    )
                ]
                changed = run_for_ids(
                    conn,
                    "UPDATE image_jobs SET status = 'interrupted', error_json = :error, "
                    "completed_at = MAX(:now, updated_at), updated_at = MAX(:now, updated_at) "
                    "WHERE status = 'running' AND id IN ({ids})",
                    ids,
                    {"error": error_text, "now": now},
                )
                self._refresh_bytes(conn, ids)
                self._finished(conn, ids)
            return changed

        return await self._db.run(operation)

    async def instance_counts(self) -> dict[str, int]:
        """Running jobs per lease owner, for diagnostics (unleased running jobs are omitted)."""

        def operation(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT q.lease_owner, COUNT(*) FROM job_queue AS q "
                "JOIN image_jobs AS j ON j.id = q.job_id "
                "WHERE j.status = 'running' AND q.lease_owner IS NOT NULL "
                "GROUP BY q.lease_owner ORDER BY q.lease_owner"
            ).fetchall()
            return counts_by_name(rows)

        return await self._db.run(operation)

    async def queued_by_provider(self) -> dict[str, int]:
        """Queued jobs per recorded provider; unrouted ones under :data:`UNROUTED`."""

        def operation(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT COALESCE(q.provider, ?), COUNT(*) FROM image_jobs AS j "
                "LEFT JOIN job_queue AS q ON q.job_id = j.id "
                "WHERE j.status = 'queued' GROUP BY 1 ORDER BY 1",
                (UNROUTED,),
            ).fetchall()
            return counts_by_name(rows)

        return await self._db.run(operation)

    async def prune(
        self, *, now: int, retention_secs: int, max_retained: int, max_retained_bytes: int
    ) -> int:
        """As :meth:`SqliteJobStore.prune`; also drops queue rows whose job is long gone."""
        removed = await super().prune(
            now=now,
            retention_secs=retention_secs,
            max_retained=max_retained,
            max_retained_bytes=max_retained_bytes,
        )
        cutoff = now - _ROUTE_GRACE_SECS

        def operation(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM job_queue WHERE registered_at <= ? "
                "AND NOT EXISTS (SELECT 1 FROM image_jobs WHERE id = job_queue.job_id)",
                (cutoff,),
            )

        await self._db.run(operation)
        return removed

    # -- notifications -----------------------------------------------------------------------

    async def notify_job_event(self, kind: JobEventKind | str, job_id: str) -> None:
        """Record a notification every subscriber (in any process on this file) will see."""
        event = check_event_kind(kind)
        check_job_id(job_id)
        keep = self._retained_events

        def operation(conn: sqlite3.Connection) -> None:
            with immediate(conn):
                cursor = conn.execute(
                    "INSERT INTO job_queue_events (kind, job_id) VALUES (?, ?)",
                    (event.value, job_id),
                )
                newest = int(cursor.lastrowid or 0)
                conn.execute("DELETE FROM job_queue_events WHERE seq <= ?", (newest - keep,))

        await self._db.run(operation)

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[JobEvent]]:
        """Notifications recorded after entry, in order, found by polling the file.

        A subscriber that falls more than the retained number of events behind misses the
        oldest ones; the durable rows remain the source of truth.
        """

        def newest(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM job_queue_events").fetchone()
            return int(row[0])

        start = await self._db.run(newest)
        events = self._poll_events(start)
        try:
            yield events
        finally:
            await events.aclose()

    async def _poll_events(self, after: int) -> AsyncGenerator[JobEvent, None]:
        interval = self._event_poll_interval_s

        def fetch(conn: sqlite3.Connection) -> builtins.list[Any]:
            return conn.execute(
                "SELECT seq, kind, job_id FROM job_queue_events WHERE seq > ? "
                "ORDER BY seq LIMIT 100",
                (after,),
            ).fetchall()

        while True:
            rows = await self._db.run(fetch)
            for row in rows:
                after = int(row[0])
                event = job_event(row[1], row[2])
                if event is not None:
                    yield event
            if not rows:
                await asyncio.sleep(interval)
