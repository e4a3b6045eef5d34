"""Durable image jobs in PostgreSQL, shared by any number of bridge instances (issue 14).

Same behaviour as :class:`~imagebridge.storage.sqlite.jobs.SqliteJobStore`: the
same checks from :mod:`.rules`, the same errors, cursors, idempotency and logical-bytes
accounting. Where SQLite serializes writers with ``BEGIN IMMEDIATE``, this store takes a
transaction-scoped advisory lock around admission (so ``max_pending`` and the byte budget hold
across instances) and around pruning, and row locks everywhere else.

The logical size of a row is a stored generated column computed by PostgreSQL from the same
formula, so it can never go stale. The shared-queue primitives (``claim_next`` with ``FOR
UPDATE SKIP LOCKED``, leases, ``LISTEN``/``NOTIFY``) are documented on each method.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any, Self

import psycopg
from psycopg.rows import dict_row

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError
from imagebridge.storage._common import (
    JOB_RECORD_COLUMNS,
    JOB_STORE,
    TERMINAL_SQL,
    CancelStep,
    StoreLifecycle,
    cancel_step,
    check_body_limits,
    check_capacity,
    check_failure,
    check_finishable,
    check_history_update,
    check_job_lookup,
    check_progress,
    check_queued_page,
    check_submission,
    check_transition,
    history_change,
    history_query,
    job_id_taken,
    job_identity,
    job_page,
    job_record,
    job_statistics,
    logical_bytes_sql,
    prepare_error,
    prepare_interruption,
    prepare_result,
    prepare_submission,
    prune_cutoff,
    replayed,
)
from imagebridge.storage.interfaces import (
    DEFAULT_BUSY_TIMEOUT_MS,
    DEFAULT_PAGE_LIMIT,
    MAX_ERROR_JSON_BYTES,
    MAX_RESULT_JSON_BYTES,
)
from imagebridge.storage.postgres.database import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_POOL_MAX_SIZE,
    DEFAULT_POOL_MIN_SIZE,
    DEFAULT_SCHEMA,
    Connection,
    PgMigration,
    PgSchema,
    PostgresDatabase,
    advisory_key,
    inspect_postgres_schema,
    missing_objects,
    quote_schema,
    table_columns,
)
from imagebridge.storage.records import (
    LEGACY_SCOPE,
    CreateResult,
    JobEvent,
    JobEventKind,
    JobIdentity,
    JobPage,
    JobRecord,
    JobStatistics,
    JobVisibility,
    JsonInput,
    LeaseRenewal,
    SchemaStatus,
)
from imagebridge.storage.rules import job_not_found
from imagebridge.storage.sqlite.shared_queue import (
    UNROUTED,
    check_claim,
    check_event_kind,
    check_heartbeat,
    check_provider,
    counts_by_name,
    decode_job_event,
    encode_job_event,
    lease_renewal,
)

__all__ = ["JOB_PG_SCHEMA", "PostgresJobStore", "inspect_postgres_job_schema"]


# -- accounting ------------------------------------------------------------------------------


def _octets(column: str) -> str:
    return f"COALESCE(octet_length({column})::bigint, 0)"


_LOGICAL_BYTES_SQL = logical_bytes_sql(_octets)


# -- schema ----------------------------------------------------------------------------------

_COLUMNS = (*JOB_RECORD_COLUMNS, "provider", "lease_owner", "lease_expires_at")
"""Every column an existing table must have: what a record reads, and the queue's own."""

# Identifier-like text is compared bytewise (COLLATE "C"), as in SQLite, whatever the
# database's default collation: ids order and page the same on both backends.
_CREATE_TABLE = f"""
CREATE TABLE IF NOT EXISTS {{schema}}.image_jobs (
    id text COLLATE "C" PRIMARY KEY,
    auth_scope text COLLATE "C" NOT NULL DEFAULT '{LEGACY_SCOPE}',
    status text COLLATE "C" NOT NULL CHECK (status IN
        ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    started_at bigint,
    completed_at bigint,
    progress_stage text COLLATE "C",
    partial_images bigint NOT NULL DEFAULT 0,
    cancel_requested boolean NOT NULL DEFAULT false,
    favorite boolean NOT NULL DEFAULT false,
    deleted_at bigint,
    submission_key_hash text COLLATE "C",
    request_fingerprint text COLLATE "C",
    provider text COLLATE "C",
    lease_owner text COLLATE "C",
    lease_expires_at bigint,
    prompt_search text NOT NULL DEFAULT '',
    request_json text NOT NULL,
    response_json text,
    error_json text,
    logical_bytes bigint GENERATED ALWAYS AS {_LOGICAL_BYTES_SQL} STORED
)
"""

_INDEXES = {
    "image_jobs_scope_history_idx": "ON {schema}.image_jobs (auth_scope, created_at DESC, id DESC)",
    "image_jobs_submission_idx": "ON {schema}.image_jobs (auth_scope, submission_key_hash) "
    "WHERE submission_key_hash IS NOT NULL",
    "image_jobs_queue_idx": "ON {schema}.image_jobs (created_at, id) WHERE status = 'queued'",
    "image_jobs_lease_idx": "ON {schema}.image_jobs (lease_expires_at) WHERE status = 'running'",
    "image_jobs_logical_bytes_idx": "ON {schema}.image_jobs (logical_bytes)",
}
_UNIQUE_INDEXES = frozenset({"image_jobs_submission_idx"})


async def _migrate_v1(conn: Connection, schema: str, recorded: bool) -> None:
    """The jobs table in its full shape, with its indexes (re-created when missing)."""
    missing = await missing_objects(conn, schema, ("image_jobs", *_INDEXES))
    quoted = quote_schema(schema)
    if "image_jobs" in missing:
        await conn.execute(_CREATE_TABLE.format(schema=quoted))
    else:
        absent = set(_COLUMNS) - await table_columns(conn, schema, "image_jobs")
        if absent:
            raise BridgeError(
                JOB_STORE.code,
                f"{JOB_STORE.label} has an unrecognised image_jobs table",
                details={"missing_columns": sorted(absent)},
            )
    for index, definition in _INDEXES.items():
        if index in missing:
            unique = "UNIQUE " if index in _UNIQUE_INDEXES else ""
            await conn.execute(
                f"CREATE {unique}INDEX IF NOT EXISTS {index} " + definition.format(schema=quoted)
            )


JOB_PG_SCHEMA = PgSchema(component="jobs", migrations=(PgMigration(1, _migrate_v1),))

# -- rows ------------------------------------------------------------------------------------


def _columns(names: tuple[str, ...], prefix: str = "") -> str:
    return ", ".join(f"{prefix}{name}" for name in names)


_RECORD_COLUMNS = _columns(JOB_RECORD_COLUMNS)


def _record(row: Mapping[str, Any]) -> JobRecord:
    """A row as a record, with the route :meth:`PostgresJobStore.claim_next` returns."""
    return job_record(row, provider=row.get("provider"))


async def _rows(conn: Connection, sql: str, params: Any = None) -> builtins.list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql, params)
        return await cursor.fetchall()


async def _row(conn: Connection, sql: str, params: Any = None) -> dict[str, Any] | None:
    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql, params)
        return await cursor.fetchone()


async def _scalar(conn: Connection, sql: str, params: Any = None) -> Any:
    cursor = await conn.execute(sql, params)
    row = await cursor.fetchone()
    return None if row is None else row[0]


# -- the store -------------------------------------------------------------------------------


class PostgresJobStore(StoreLifecycle[PostgresDatabase]):
    """:class:`~imagebridge.storage.interfaces.SharedJobStore` over one PostgreSQL schema."""

    def __init__(
        self, database: PostgresDatabase, *, max_result_bytes: int, max_error_bytes: int
    ) -> None:
        self._db = database
        self._max_result_bytes = max_result_bytes
        self._max_error_bytes = max_error_bytes
        self._t = database.table("image_jobs")
        self._admission_key = advisory_key(database.schema, "jobs:admission")
        self._prune_key = advisory_key(database.schema, "jobs:prune")
        self._channel = f"{database.schema}_job_events"

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        pool_min_size: int = DEFAULT_POOL_MIN_SIZE,
        pool_max_size: int = DEFAULT_POOL_MAX_SIZE,
        max_result_bytes: int = MAX_RESULT_JSON_BYTES,
        max_error_bytes: int = MAX_ERROR_JSON_BYTES,
    ) -> Self:
        """Connect to ``url``, create or migrate the jobs table in ``schema``, open a pool."""
        check_body_limits(max_result_bytes, max_error_bytes)
        database = await PostgresDatabase.open(
            url,
            schema=schema,
            pg_schema=JOB_PG_SCHEMA,
            code=JOB_STORE.code,
            label=JOB_STORE.label,
            busy_timeout_ms=busy_timeout_ms,
            connect_timeout_s=connect_timeout_s,
            pool_min_size=pool_min_size,
            pool_max_size=pool_max_size,
        )
        return cls(database, max_result_bytes=max_result_bytes, max_error_bytes=max_error_bytes)

    @property
    def schema(self) -> str:
        return self._db.schema

    @property
    def max_result_bytes(self) -> int:
        return self._max_result_bytes

    async def _fetch(self, conn: Connection, scope: str, job_id: str, *, lock: bool) -> JobRecord:
        row = await _row(
            conn,
            f"SELECT {_RECORD_COLUMNS} FROM {self._t} "  # noqa: S608
            "WHERE auth_scope = %s AND id = %s" + (" FOR UPDATE" if lock else ""),
            (scope, job_id),
        )
        if row is None:
            raise job_not_found()
        return _record(row)

    # -- submission ----------------------------------------------------------------------

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
        """Insert a queued job, or replay the job an earlier identical submission made.

        Idempotency is decided before capacity, so a replay succeeds even when the queue is
        full; a refused submission stores nothing. ``provider`` is the resolved primary
        provider :meth:`claim_next` routes by (``None``: any instance may claim the job).
        """
        key_hash = check_submission(
            scope,
            job_id,
            prompt,
            submission_key=submission_key,
            fingerprint=fingerprint,
            now=now,
            max_pending=max_pending,
            max_database_bytes=max_database_bytes,
        )
        route = None if provider is None else check_provider(provider)
        # Serializing a large request is kept off the event loop.
        request_text, search, new_bytes = await asyncio.to_thread(
            prepare_submission,
            request_json,
            prompt,
            job_id=job_id,
            scope=scope,
            key_hash=key_hash,
            fingerprint=fingerprint,
        )
        t = self._t

        async def operation(conn: Connection) -> CreateResult:
            # One submission at a time across every instance: capacity and the byte budget
            # are checked and charged atomically, as SQLite's single writer does.
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._admission_key,))
            if key_hash is not None:
                existing = await _row(
                    conn,
                    f"SELECT {_RECORD_COLUMNS} FROM {t} "  # noqa: S608
                    "WHERE auth_scope = %s AND submission_key_hash = %s",
                    (scope, key_hash),
                )
                if existing is not None:
                    return replayed(_record(existing), fingerprint)
            queued = await _scalar(
                conn,
                f"SELECT COUNT(*) FROM {t} WHERE status = 'queued'",  # noqa: S608
            )
            used = await _scalar(
                conn,
                f"SELECT COALESCE(SUM(logical_bytes), 0) FROM {t}",  # noqa: S608
            )
            check_capacity(
                int(queued),
                int(used),
                new_bytes,
                max_pending=max_pending,
                max_database_bytes=max_database_bytes,
            )
            if await _scalar(conn, f"SELECT 1 FROM {t} WHERE id = %s", (job_id,)):  # noqa: S608
                raise job_id_taken()
            row = await _row(
                conn,
                f"INSERT INTO {t} (id, auth_scope, status, created_at, updated_at, "  # noqa: S608
                "partial_images, cancel_requested, favorite, submission_key_hash, "
                "request_fingerprint, provider, prompt_search, request_json) "
                "VALUES (%s, %s, 'queued', %s, %s, 0, false, false, %s, %s, %s, %s, %s) "
                f"RETURNING {_RECORD_COLUMNS}",
                (job_id, scope, now, now, key_hash, fingerprint, route, search, request_text),
            )
            assert row is not None
            return CreateResult(job=_record(row), created=True)

        return await self._db.run(operation)

    # -- worker transitions --------------------------------------------------------------

    async def claim(self, scope: str, job_id: str, *, now: int) -> bool:
        """queued (and not cancel-requested) → running at stage ``starting`` (no lease)."""
        check_transition(scope, now)

        async def operation(conn: Connection) -> bool:
            cursor = await conn.execute(
                f"UPDATE {self._t} SET status = 'running', progress_stage = 'starting', "  # noqa: S608
                "started_at = GREATEST(%s, updated_at), updated_at = GREATEST(%s, updated_at) "
                "WHERE auth_scope = %s AND id = %s AND status = 'queued' "
                "AND NOT cancel_requested",
                (now, now, scope, job_id),
            )
            return cursor.rowcount == 1

        return await self._db.run(operation)

    async def progress(
        self, scope: str, job_id: str, *, stage: str, partial_images: int, now: int
    ) -> bool:
        """Record the latest stage of a running job; other states are left alone."""
        check_progress(scope, stage, partial_images, now)

        async def operation(conn: Connection) -> bool:
            cursor = await conn.execute(
                f"UPDATE {self._t} SET progress_stage = %s, partial_images = %s, "  # noqa: S608
                "updated_at = GREATEST(%s, updated_at) "
                "WHERE auth_scope = %s AND id = %s AND status = 'running'",
                (stage, partial_images, now, scope, job_id),
            )
            return cursor.rowcount == 1

        return await self._db.run(operation)

    async def succeed(
        self, scope: str, job_id: str, response_json: JsonInput, *, now: int
    ) -> JobRecord:
        """running → succeeded with its result.

        A result above :attr:`max_result_bytes` is refused with an ``artifact`` error and
        the job is left running, so the caller can store a trimmed result instead.
        """
        check_transition(scope, now)
        text = await asyncio.to_thread(prepare_result, response_json, self._max_result_bytes)
        return await self._finish(scope, job_id, ImageJobStatus.SUCCEEDED, text, None, now)

    async def fail(
        self,
        scope: str,
        job_id: str,
        status: ImageJobStatus | str,
        error_json: JsonInput,
        *,
        now: int,
    ) -> JobRecord:
        """running → failed | cancelled | interrupted with its error (oversized → replaced)."""
        final = check_failure(scope, status, now)
        text = await asyncio.to_thread(prepare_error, error_json, self._max_error_bytes)
        return await self._finish(scope, job_id, final, None, text, now)

    async def _finish(
        self,
        scope: str,
        job_id: str,
        status: ImageJobStatus,
        response_text: str | None,
        error_text: str | None,
        now: int,
    ) -> JobRecord:
        async def operation(conn: Connection) -> JobRecord:
            stamp = check_finishable(await self._fetch(conn, scope, job_id, lock=True), now)
            row = await _row(
                conn,
                f"UPDATE {self._t} SET status = %s, response_json = %s, "  # noqa: S608
                "error_json = %s, completed_at = %s, updated_at = %s, "
                f"progress_stage = 'completed' WHERE id = %s RETURNING {_RECORD_COLUMNS}",
                (status.value, response_text, error_text, stamp, stamp, job_id),
            )
            assert row is not None
            return _record(row)

        return await self._db.run(operation)

    async def request_cancel(self, scope: str, job_id: str, *, now: int) -> JobRecord:
        """Queued → cancelled at once; running → flagged for its worker; terminal → as is.

        The flag is durable: the instance running the job sees it through
        :meth:`heartbeat` even if it misses the ``cancel_requested`` notification.
        """
        check_transition(scope, now)
        t = self._t

        async def operation(conn: Connection) -> JobRecord:
            current = await self._fetch(conn, scope, job_id, lock=True)
            step = cancel_step(current)
            stamp = max(now, current.updated_at)
            if step is CancelStep.CANCEL:
                sql = (
                    f"UPDATE {t} SET status = 'cancelled', cancel_requested = true, "  # noqa: S608
                    "completed_at = %s, updated_at = %s, progress_stage = 'completed' "
                    f"WHERE id = %s RETURNING {_RECORD_COLUMNS}"
                )
                params: tuple[Any, ...] = (stamp, stamp, job_id)
            elif step is CancelStep.FLAG:
                sql = (
                    f"UPDATE {t} SET cancel_requested = true, updated_at = %s "  # noqa: S608
                    f"WHERE id = %s RETURNING {_RECORD_COLUMNS}"
                )
                params = (stamp, job_id)
            else:
                return current
            row = await _row(conn, sql, params)
            assert row is not None
            return _record(row)

        return await self._db.run(operation)

    async def recover_interrupted(self, *, now: int) -> int:
        """Every running row → interrupted; never re-run. For a single instance's restart.

        This marks *every* running job, other instances' live ones included: a shared
        deployment calls :meth:`expire_leases` instead. The progress stage is kept.
        """
        error_text = prepare_interruption(now)

        async def operation(conn: Connection) -> int:
            cursor = await conn.execute(
                f"UPDATE {self._t} SET status = 'interrupted', error_json = %s, "  # noqa: S608
                "completed_at = GREATEST(%s, updated_at), updated_at = GREATEST(%s, updated_at) "
                "WHERE status = 'running'",
                (error_text, now, now),
            )
            return max(cursor.rowcount, 0)

        return await self._db.run(operation)

    async def queued_identities(
        self, limit: int, *, after: JobIdentity | None = None
    ) -> builtins.list[JobIdentity]:
        """Queued jobs across scopes, oldest first; pass the last one as ``after`` to page on."""
        check_queued_page(limit, after)
        t = self._t

        async def operation(conn: Connection) -> builtins.list[JobIdentity]:
            if after is None:
                cursor = await conn.execute(
                    f"SELECT auth_scope, id, created_at FROM {t} "  # noqa: S608
                    "WHERE status = 'queued' ORDER BY created_at, id LIMIT %s",
                    (limit,),
                )
            else:
                cursor = await conn.execute(
                    f"SELECT auth_scope, id, created_at FROM {t} "  # noqa: S608
                    "WHERE status = 'queued' AND (created_at, id) > (%s, %s) "
                    "ORDER BY created_at, id LIMIT %s",
                    (after.created_at, after.id, limit),
                )
            rows = await cursor.fetchall()
            return [job_identity(row) for row in rows]

        return await self._db.run(operation)

    # -- the shared queue ----------------------------------------------------------------

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
            row = await _row(
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
                f"RETURNING {_columns((*JOB_RECORD_COLUMNS, 'provider'), 'j.')}",
                {"providers": wanted, "now": now, "owner": owner, "deadline": deadline},
            )
            return None if row is None else _record(row)

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
                "AND lease_expires_at <= %(now)s",
                {"error": error_text, "now": now},
            )
            return max(cursor.rowcount, 0)

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

    # -- history ---------------------------------------------------------------------------

    async def get(self, scope: str, job_id: str) -> JobRecord:
        check_job_lookup(scope, job_id)

        async def operation(conn: Connection) -> JobRecord:
            return await self._fetch(conn, scope, job_id, lock=False)

        return await self._db.run(operation)

    async def update_history(
        self,
        scope: str,
        job_id: str,
        *,
        favorite: bool | None = None,
        deleted: bool | None = None,
        now: int,
    ) -> JobRecord:
        """Set the favourite marker and/or soft-delete (or restore) a terminal job."""
        check_history_update(scope, favorite=favorite, deleted=deleted, now=now)

        async def operation(conn: Connection) -> JobRecord:
            current = await self._fetch(conn, scope, job_id, lock=True)
            new_favorite, new_deleted, stamp = history_change(
                current, favorite=favorite, deleted=deleted, now=now
            )
            row = await _row(
                conn,
                f"UPDATE {self._t} SET favorite = %s, deleted_at = %s, updated_at = %s "  # noqa: S608
                f"WHERE id = %s RETURNING {_RECORD_COLUMNS}",
                (new_favorite, new_deleted, stamp, job_id),
            )
            assert row is not None
            return _record(row)

        return await self._db.run(operation)

    async def prune(
        self, *, now: int, retention_secs: int, max_retained: int, max_retained_bytes: int
    ) -> int:
        """Delete old or excess terminal history in one transaction; return rows removed.

        First rows completed at or before ``now - retention_secs``; then, newest first by
        creation, every row past ``max_retained`` or past ``max_retained_bytes`` of
        cumulative logical size. Favourites are never pruned; soft-deleted rows are.
        """
        cutoff = prune_cutoff(
            now=now,
            retention_secs=retention_secs,
            max_retained=max_retained,
            max_retained_bytes=max_retained_bytes,
        )
        t = self._t

        async def operation(conn: Connection) -> int:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._prune_key,))
            expired = await conn.execute(
                f"DELETE FROM {t} WHERE status IN {TERMINAL_SQL} AND NOT favorite "  # noqa: S608
                "AND COALESCE(completed_at, updated_at) <= %s",
                (cutoff,),
            )
            excess = await conn.execute(
                f"WITH ranked AS (SELECT id, "  # noqa: S608
                "row_number() OVER w AS rank, SUM(logical_bytes) OVER w AS cumulative "
                f"FROM {t} WHERE status IN {TERMINAL_SQL} AND NOT favorite "
                "WINDOW w AS (ORDER BY created_at DESC, id DESC "
                "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)) "
                f"DELETE FROM {t} AS j USING ranked WHERE j.id = ranked.id "
                "AND (ranked.rank > %s OR ranked.cumulative > %s)",
                (max_retained, max_retained_bytes),
            )
            return max(expired.rowcount, 0) + max(excess.rowcount, 0)

        return await self._db.run(operation)

    async def statistics(self) -> JobStatistics:
        """Counts across every scope, the table's size on disk and the logical size."""
        t = self._t

        async def operation(conn: Connection) -> JobStatistics:
            cursor = await conn.execute(
                f"SELECT status, COUNT(*) FROM {t} GROUP BY status"  # noqa: S608
            )
            counts = await cursor.fetchall()
            hidden = await _scalar(
                conn,
                f"SELECT COUNT(*) FROM {t} WHERE deleted_at IS NOT NULL",  # noqa: S608
            )
            logical = await _scalar(
                conn,
                f"SELECT COALESCE(SUM(logical_bytes), 0) FROM {t}",  # noqa: S608
            )
            size = await _scalar(conn, "SELECT pg_total_relation_size(%s::regclass)", (t,))
            return job_statistics(counts, hidden=hidden, database_bytes=size, logical_bytes=logical)

        return await self._db.run(operation)

    async def healthy(self) -> bool:
        """Whether the store still answers queries (for readiness)."""

        async def operation(conn: Connection) -> bool:
            await conn.execute(f"SELECT 1 FROM {self._t} LIMIT 1")  # noqa: S608
            return True

        try:
            return await self._db.run(operation)
        except BridgeError:
            return False

    async def list(
        self,
        scope: str,
        *,
        visibility: JobVisibility | str = JobVisibility.ACTIVE,
        status: ImageJobStatus | str | None = None,
        favorite: bool | None = None,
        search: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
    ) -> JobPage:
        """One page of the scope's history, newest first; filters apply before paging.

        ``search`` matches a literal, case-insensitive substring of the prompt (``%``,
        ``_`` and ``\\`` are ordinary characters). ``next_cursor`` is set only when more
        rows follow.
        """
        query = history_query(
            scope,
            visibility=visibility,
            status=status,
            favorite=favorite,
            search=search,
            cursor=cursor,
            limit=limit,
            placeholder="%({})s",
            before_position="(created_at, id) < (%(created)s, %(after_id)s)",
        )
        sql = query.select(self._t)

        async def operation(conn: Connection) -> JobPage:
            return job_page(await _rows(conn, sql, query.params), query.limit)

        return await self._db.run(operation)


async def inspect_postgres_job_schema(
    url: str, *, schema: str = DEFAULT_SCHEMA, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
) -> SchemaStatus:
    """Read-only: the job schema version in ``schema`` (nothing is created)."""
    return await inspect_postgres_schema(
        url,
        JOB_PG_SCHEMA,
        schema=schema,
        code=JOB_STORE.code,
        label=JOB_STORE.label,
        connect_timeout_s=connect_timeout_s,
    )
