"""The shared job queue of issue 14 on PostgreSQL: :class:`PostgresSharedJobStore`.

Any number of bridge instances share one PostgreSQL schema as one queue. Each job's route and
lease are columns of the jobs table (:mod:`.job_schema`), so :class:`PostgresSharedJobStore` is
the plain :class:`~.jobs.PostgresJobStore` plus the primitives: ``claim_next`` with ``FOR
UPDATE SKIP LOCKED``, leases renewed by ``heartbeat`` and expired by ``expire_leases``, and job
notifications over ``LISTEN``/``NOTIFY``. The queue's rules and its notification codec are
backend-neutral, in :mod:`imagebridge.storage.rules.queue`, shared with
:class:`~imagebridge.storage.sqlite.shared_queue.SqliteSharedJobStore`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

import psycopg

from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.jobs import PostgresJobStore
from imagebridge.storage.postgres.queries import fetch_row
from imagebridge.storage.records import JobEvent, JobEventKind, JobRecord, LeaseRenewal
from imagebridge.storage.rows import JOB_RECORD_COLUMNS, counts_by_name, job_record, lease_renewal
from imagebridge.storage.rules.jobs import prepare_interruption
from imagebridge.storage.rules.queue import (
    UNROUTED,
    check_claim,
    check_event_kind,
    check_heartbeat,
    decode_job_event,
    encode_job_event,
)

__all__ = ["PostgresSharedJobStore"]

_CLAIMED_COLUMNS = ", ".join(f"j.{name}" for name in (*JOB_RECORD_COLUMNS, "provider"))
"""What ``claim_next`` returns: the record's columns and the job's route."""


class PostgresSharedJobStore(PostgresJobStore):
    """:class:`~imagebridge.storage.interfaces.SharedJobStore` over one PostgreSQL schema."""

    def __init__(
        self, database: PostgresDatabase, *, max_result_bytes: int, max_error_bytes: int
    ) -> None:
        super().__init__(
            database, max_result_bytes=max_result_bytes, max_error_bytes=max_error_bytes
        )
        self._channel = f"{database.schema}_job_events"

    # -- claiming and leases -----------------------------------------------------------

    async def claim_next(
        self, instance_id: str, providers: Sequence[str], *, now: int, lease_secs: int
    ) -> JobRecord | None:
        """Claim the oldest claimable queued job for one of ``providers`` under a lease.

        Claimable: queued, not cancel-requested, routed to one of ``providers`` or to no
        recorded provider. Rows another instance is claiming right now are skipped (``FOR
        UPDATE SKIP LOCKED``), so concurrent claimers never wait for each other and never
        get the same job. The job becomes ``running`` at stage ``starting``, owned by
        ``instance_id`` until ``now + lease_secs`` unless :meth:`heartbeat` extends it.
        Returns ``None`` when nothing is claimable (always, for an empty ``providers``).
        """
        owner, wanted, deadline = check_claim(
            instance_id, providers, now=now, lease_secs=lease_secs
        )
        if not wanted:
            return None
        t = self._t

        async def operation(conn: Connection) -> JobRecord | None:
            row = await fetch_row(
                conn,
                f"WITH next AS (SELECT id FROM {t} "  # noqa: S608
                "WHERE status = 'queued' AND NOT cancel_requested "
                "AND (provider IS NULL OR provider = ANY(%(providers)s)) "
                "ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
                f"UPDATE {t} AS j SET status = 'running', progress_stage = 'starting', "
                "started_at = GREATEST(%(now)s, j.updated_at), "
                "updated_at = GREATEST(%(now)s, j.updated_at), "
                "lease_owner = %(owner)s, lease_expires_at = %(deadline)s "
                f"FROM next WHERE j.id = next.id "
                f"RETURNING {_CLAIMED_COLUMNS}",
                {"providers": wanted, "now": now, "owner": owner, "deadline": deadline},
            )
            return None if row is None else job_record(row, provider=row["provider"])

        return await self._db.run(operation)

    async def heartbeat(
        self, instance_id: str, job_ids: Sequence[str], *, now: int, lease_secs: int
    ) -> LeaseRenewal:
        """Extend this instance's leases on the running jobs among ``job_ids``.

        A lease never moves backwards. A job that is no longer running under this instance
        (finished, or expired into ``interrupted``) is not renewed: its worker should stop.
        ``cancel_requested`` lists renewed jobs whose cancellation was asked for, so a
        missed notification costs at most one heartbeat period.
        """
        owner, ids, deadline = check_heartbeat(instance_id, job_ids, now=now, lease_secs=lease_secs)
        if not ids:
            return LeaseRenewal(renewed=frozenset(), cancel_requested=frozenset())

        async def operation(conn: Connection) -> LeaseRenewal:
            cursor = await conn.execute(
                f"UPDATE {self._t} SET lease_expires_at = "  # noqa: S608
                "GREATEST(COALESCE(lease_expires_at, 0), %s) "
                "WHERE id = ANY(%s) AND status = 'running' AND lease_owner = %s "
                "RETURNING id, cancel_requested",
                (deadline, ids, owner),
            )
            return lease_renewal(await cursor.fetchall())

        return await self._db.run(operation)

    async def expire_leases(self, *, now: int) -> int:
        """Mark running jobs whose lease ran out at or before ``now`` as ``interrupted``.

        The owner stopped heartbeating (it crashed or lost the database), so whether the
        provider finished is unknown: the job gets :meth:`recover_interrupted`'s error and is
        never run again. Jobs claimed without a lease (plain :meth:`claim`) are untouched.
        Any instance may call this periodically; concurrent calls mark each job once.
        """
        error_text = prepare_interruption(now)

        async def operation(conn: Connection) -> int:
            cursor = await conn.execute(
                f"UPDATE {self._t} SET status = 'interrupted', error_json = %(error)s, "  # noqa: S608
                "completed_at = GREATEST(%(now)s, updated_at), "
                "updated_at = GREATEST(%(now)s, updated_at) "
                "WHERE status = 'running' AND lease_expires_at IS NOT NULL "
                "AND lease_expires_at <= %(now)s RETURNING id",
                {"error": error_text, "now": now},
            )
            ids = [str(row[0]) for row in await cursor.fetchall()]
            await self._finished(conn, ids)
            return len(ids)

        return await self._db.run(operation)

    async def instance_counts(self) -> dict[str, int]:
        """Running jobs per lease owner, for diagnostics (unleased running jobs are omitted)."""

        async def operation(conn: Connection) -> dict[str, int]:
            cursor = await conn.execute(
                f"SELECT lease_owner, COUNT(*) FROM {self._t} "  # noqa: S608
                "WHERE status = 'running' AND lease_owner IS NOT NULL "
                "GROUP BY lease_owner ORDER BY lease_owner"
            )
            return counts_by_name(await cursor.fetchall())

        return await self._db.run(operation)

    async def queued_by_provider(self) -> dict[str, int]:
        """Queued jobs per recorded provider; unrouted ones under :data:`UNROUTED`."""

        async def operation(conn: Connection) -> dict[str, int]:
            cursor = await conn.execute(
                f"SELECT COALESCE(provider, %s), COUNT(*) FROM {self._t} "  # noqa: S608
                "WHERE status = 'queued' GROUP BY 1 ORDER BY 1",
                (UNROUTED,),
            )
            return counts_by_name(await cursor.fetchall())

        return await self._db.run(operation)

    # -- notifications -----------------------------------------------------------------

    async def notify_job_event(self, kind: JobEventKind | str, job_id: str) -> None:
        """``NOTIFY`` every instance subscribed to this schema's job channel.

        Delivery is immediate but best-effort (a subscriber that is reconnecting misses it);
        the durable rows stay authoritative.
        """
        payload = encode_job_event(check_event_kind(kind), job_id)
        channel = self._channel

        async def operation(conn: Connection) -> None:
            await conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))

        await self._db.run(operation)

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[JobEvent]]:
        """Job notifications sent after entry, in order, on a dedicated ``LISTEN`` connection.

        Iterating raises a retryable :class:`BridgeError` if the connection is lost; the
        caller subscribes again and re-reads the durable state it cares about.
        """
        conn = await self._db.listener()
        try:
            try:
                await conn.execute(f'LISTEN "{self._channel}"')
            except psycopg.Error as exc:
                raise self._db.translate(exc) from None
            events = self._notifications(conn)
            try:
                yield events
            finally:
                await events.aclose()
        finally:
            await conn.close()

    async def _notifications(self, conn: Connection) -> AsyncGenerator[JobEvent, None]:
        notifies = conn.notifies()
        try:
            while True:
                try:
                    notify = await anext(notifies)
                except StopAsyncIteration:
                    return
                except psycopg.Error as exc:
                    raise self._db.translate(exc) from None
                if notify.channel != self._channel:
                    continue
                event = decode_job_event(notify.payload)
                if event is not None:
                    yield event
        finally:
            await notifies.aclose()
