"""Durable image jobs in PostgreSQL, shared by any number of bridge instances (issue 14).

Same behaviour as :class:`~imagebridge.storage.jobs.SqliteJobStore` (runtime.md §5.1): the
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
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any, Self

import psycopg
from psycopg.rows import dict_row

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.base import (
    ACTIVE_ROW_RESERVE_BYTES,
    DEFAULT_BUSY_TIMEOUT_MS,
    DEFAULT_PAGE_LIMIT,
    LEGACY_SCOPE,
    MAX_ERROR_JSON_BYTES,
    MAX_RESULT_JSON_BYTES,
    ROW_OVERHEAD_BYTES,
    CreateResult,
    JobEvent,
    JobEventKind,
    JobIdentity,
    JobPage,
    JobRecord,
    JobStatistics,
    JobSummary,
    JobVisibility,
    JsonInput,
    LeaseRenewal,
    SchemaStatus,
)
from imagebridge.storage.cursors import decode_job_cursor, encode_job_cursor
from imagebridge.storage.jobs import (  # one accounting formula and bound for both backends
    _TERMINAL_SQL,
    MAX_QUEUED_IDENTITIES,
    _active_row_bytes,
)
from imagebridge.storage.postgres import (
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
from imagebridge.storage.queue import (
    UNROUTED,
    check_event_kind,
    check_heartbeat_jobs,
    check_instance_id,
    check_lease_secs,
    check_provider,
    check_providers,
    decode_job_event,
    encode_job_event,
    lease_deadline,
)
from imagebridge.storage.rules import (
    check_count,
    check_failure_status,
    check_fingerprint,
    check_job_id,
    check_limit,
    check_partial_images,
    check_scope,
    check_stage,
    check_status,
    check_timestamp,
    check_visibility,
    dump_json_object,
    hash_submission_key,
    interrupted_error,
    is_canonical_uuid,
    job_not_found,
    like_contains_pattern,
    normalize_search,
    oversized_error_replacement,
    prompt_search_text,
    queue_full,
    utf8_size,
)

__all__ = ["JOB_PG_SCHEMA", "PostgresJobStore", "inspect_postgres_job_schema"]

_LABEL = "durable job database"
_CODE = ErrorCode.INTERNAL

# -- accounting ------------------------------------------------------------------------------


def _octets(column: str) -> str:
    return f"COALESCE(octet_length({column})::bigint, 0)"


# The PostgreSQL twin of the SQLite store's formula (and of ``_active_row_bytes``).
_LOGICAL_BYTES_SQL = (
    "("
    + " + ".join(
        _octets(c)
        for c in (
            "id",
            "auth_scope",
            "request_json",
            "prompt_search",
            "submission_key_hash",
            "request_fingerprint",
        )
    )
    + f" + CASE WHEN status IN ('queued', 'running') THEN {ACTIVE_ROW_RESERVE_BYTES} ELSE "
    + _octets("response_json")
    + " + "
    + _octets("error_json")
    + f" END + {ROW_OVERHEAD_BYTES})"
)


# -- schema ----------------------------------------------------------------------------------

_COLUMNS = (
    "id",
    "auth_scope",
    "status",
    "created_at",
    "updated_at",
    "started_at",
    "completed_at",
    "progress_stage",
    "partial_images",
    "cancel_requested",
    "favorite",
    "deleted_at",
    "submission_key_hash",
    "request_fingerprint",
    "provider",
    "lease_owner",
    "lease_expires_at",
    "prompt_search",
    "request_json",
    "response_json",
    "error_json",
    "logical_bytes",
)

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
                _CODE,
                f"{_LABEL} has an unrecognised image_jobs table",
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

_RECORD_NAMES = (
    "id",
    "auth_scope",
    "status",
    "created_at",
    "updated_at",
    "started_at",
    "completed_at",
    "request_json",
    "prompt_search",
    "progress_stage",
    "partial_images",
    "response_json",
    "error_json",
    "cancel_requested",
    "favorite",
    "deleted_at",
    "submission_key_hash",
    "request_fingerprint",
    "logical_bytes",
)
_SUMMARY_NAMES = (
    "id",
    "status",
    "created_at",
    "updated_at",
    "started_at",
    "completed_at",
    "progress_stage",
    "partial_images",
    "cancel_requested",
    "favorite",
    "deleted_at",
)


def _columns(names: tuple[str, ...], prefix: str = "") -> str:
    return ", ".join(f"{prefix}{name}" for name in names)


_RECORD_COLUMNS = _columns(_RECORD_NAMES)
_SUMMARY_COLUMNS = _columns(_SUMMARY_NAMES)


def _record(row: Mapping[str, Any]) -> JobRecord:
    return JobRecord(
        id=row["id"],
        auth_scope=row["auth_scope"],
        status=ImageJobStatus(row["status"]),
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
        started_at=row["started_at"],
        completed_at=row["completed_at"],
        request_json=row["request_json"],
        prompt_search=row["prompt_search"] or "",
        progress_stage=row["progress_stage"],
        partial_images=int(row["partial_images"] or 0),
        response_json=row["response_json"],
        error_json=row["error_json"],
        cancel_requested=bool(row["cancel_requested"]),
        favorite=bool(row["favorite"]),
        deleted_at=row["deleted_at"],
        submission_key_hash=row["submission_key_hash"],
        request_fingerprint=row["request_fingerprint"],
        logical_bytes=int(row["logical_bytes"] or 0),
        provider=row.get("provider"),
    )


def _summary(row: Mapping[str, Any]) -> JobSummary:
    return JobSummary(
        id=row["id"],
        status=ImageJobStatus(row["status"]),
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
        started_at=row["started_at"],
        completed_at=row["completed_at"],
        progress_stage=row["progress_stage"],
        partial_images=int(row["partial_images"] or 0),
        cancel_requested=bool(row["cancel_requested"]),
        favorite=bool(row["favorite"]),
        deleted_at=row["deleted_at"],
    )


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


def _not_running(status: str) -> BridgeError:
    return BridgeError(_CODE, "durable job is not running", details={"status": status})


# -- the store -------------------------------------------------------------------------------


class PostgresJobStore:
    """:class:`~imagebridge.storage.base.SharedJobStore` over one PostgreSQL schema."""

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
        for label, value in (
            ("max_result_bytes", max_result_bytes),
            ("max_error_bytes", max_error_bytes),
        ):
            check_count(value, label)
        database = await PostgresDatabase.open(
            url,
            schema=schema,
            pg_schema=JOB_PG_SCHEMA,
            code=_CODE,
            label=_LABEL,
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

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

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
        check_scope(scope)
        check_job_id(job_id)
        check_timestamp(now)
        check_count(max_pending, "max_pending")
        check_count(max_database_bytes, "max_database_bytes")
        if not isinstance(prompt, str) or utf8_size(prompt) is None:
            raise BridgeError.invalid_request("prompt must be UTF-8 text", field="prompt")
        key_hash = None if submission_key is None else hash_submission_key(submission_key)
        if fingerprint is not None:
            check_fingerprint(fingerprint)
        if key_hash is not None and fingerprint is None:
            raise BridgeError(_CODE, "a submission key needs a request fingerprint")
        route = None if provider is None else check_provider(provider)

        def prepare() -> tuple[str, str, int]:
            # Serializing a large request is kept off the event loop.
            text, _ = dump_json_object(
                request_json,
                "request",
                drop_keys=("idempotency_key",),
                code=ErrorCode.INVALID_REQUEST,
            )
            search = prompt_search_text(prompt)
            size = _active_row_bytes(job_id, scope, text, search, key_hash, fingerprint)
            return text, search, size

        request_text, search, new_bytes = await asyncio.to_thread(prepare)
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
                    if existing["request_fingerprint"] == fingerprint:
                        return CreateResult(job=_record(existing), created=False)
                    raise BridgeError(
                        ErrorCode.IDEMPOTENCY_CONFLICT,
                        "idempotency key was already used for a different request",
                    )
            queued = await _scalar(
                conn,
                f"SELECT COUNT(*) FROM {t} WHERE status = 'queued'",  # noqa: S608
            )
            if int(queued) >= max_pending:
                raise queue_full("max_pending")
            used = await _scalar(
                conn,
                f"SELECT COALESCE(SUM(logical_bytes), 0) FROM {t}",  # noqa: S608
            )
            if int(used) + new_bytes > max_database_bytes:
                raise queue_full("max_database_bytes")
            if await _scalar(conn, f"SELECT 1 FROM {t} WHERE id = %s", (job_id,)):  # noqa: S608
                raise BridgeError(_CODE, "durable job id is already in use")
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
        check_scope(scope)
        check_timestamp(now)

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
        check_scope(scope)
        check_stage(stage)
        check_partial_images(partial_images)
        check_timestamp(now)

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
        check_scope(scope)
        check_timestamp(now)
        limit = self._max_result_bytes
        text, size = await asyncio.to_thread(dump_json_object, response_json, "result")
        if size > limit:
            raise BridgeError(
                ErrorCode.ARTIFACT,
                "durable job result metadata exceeds the storage reserve",
                details={"result_bytes": size, "max_result_bytes": limit},
            )
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
        check_scope(scope)
        final = check_failure_status(status)
        check_timestamp(now)
        limit = self._max_error_bytes

        def prepare() -> str:
            text, size = dump_json_object(error_json, "error")
            if size > limit:
                replacement = oversized_error_replacement(json.loads(text), size)
                text, _ = dump_json_object(replacement, "error")
            return text

        text = await asyncio.to_thread(prepare)
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
            current = await self._fetch(conn, scope, job_id, lock=True)
            if current.status is not ImageJobStatus.RUNNING:
                raise _not_running(current.status.value)
            stamp = max(now, current.updated_at)
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
        check_scope(scope)
        check_timestamp(now)
        t = self._t

        async def operation(conn: Connection) -> JobRecord:
            current = await self._fetch(conn, scope, job_id, lock=True)
            stamp = max(now, current.updated_at)
            if current.status is ImageJobStatus.QUEUED:
                sql = (
                    f"UPDATE {t} SET status = 'cancelled', cancel_requested = true, "  # noqa: S608
                    "completed_at = %s, updated_at = %s, progress_stage = 'completed' "
                    f"WHERE id = %s RETURNING {_RECORD_COLUMNS}"
                )
                params: tuple[Any, ...] = (stamp, stamp, job_id)
            elif current.status is ImageJobStatus.RUNNING and not current.cancel_requested:
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
        check_timestamp(now)
        error_text, _ = dump_json_object(interrupted_error(), "error")

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
        check_limit(limit, MAX_QUEUED_IDENTITIES)
        if after is not None and not isinstance(after, JobIdentity):
            raise BridgeError(_CODE, "after must be a JobIdentity")
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
            return [JobIdentity(auth_scope=r[0], id=r[1], created_at=int(r[2])) for r in rows]

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
        owner = check_instance_id(instance_id)
        wanted = check_providers(providers)
        check_timestamp(now)
        deadline = lease_deadline(now, check_lease_secs(lease_secs))
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
                f"RETURNING {_columns((*_RECORD_NAMES, 'provider'), 'j.')}",
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
        owner = check_instance_id(instance_id)
        ids = check_heartbeat_jobs(job_ids)
        check_timestamp(now)
        deadline = lease_deadline(now, check_lease_secs(lease_secs))
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
            rows = await cursor.fetchall()
            return LeaseRenewal(
                renewed=frozenset(str(r[0]) for r in rows),
                cancel_requested=frozenset(str(r[0]) for r in rows if r[1]),
            )

        return await self._db.run(operation)

    async def expire_leases(self, *, now: int) -> int:
        """Mark running jobs whose lease ran out at or before ``now`` as ``interrupted``.

        The owner stopped heartbeating (it crashed or lost the database), so whether the
        provider finished is unknown: the job gets :meth:`recover_interrupted`'s error and is
        never run again. Jobs claimed without a lease (plain :meth:`claim`) are untouched.
        Any instance may call this periodically; concurrent calls mark each job once.
        """
        check_timestamp(now)
        error_text, _ = dump_json_object(interrupted_error(), "error")

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
            return {str(r[0]): int(r[1]) for r in await cursor.fetchall()}

        return await self._db.run(operation)

    async def queued_by_provider(self) -> dict[str, int]:
        """Queued jobs per recorded provider; unrouted ones under :data:`UNROUTED`."""

        async def operation(conn: Connection) -> dict[str, int]:
            cursor = await conn.execute(
                f"SELECT COALESCE(provider, %s), COUNT(*) FROM {self._t} "  # noqa: S608
                "WHERE status = 'queued' GROUP BY 1 ORDER BY 1",
                (UNROUTED,),
            )
            return {str(r[0]): int(r[1]) for r in await cursor.fetchall()}

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
        check_scope(scope)
        if not isinstance(job_id, str) or not is_canonical_uuid(job_id):
            raise job_not_found()

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
        check_scope(scope)
        check_timestamp(now)
        if favorite is None and deleted is None:
            raise BridgeError.invalid_request(
                "history update must change favorite or deleted state"
            )
        for label, value in (("favorite", favorite), ("deleted", deleted)):
            if value is not None and not isinstance(value, bool):
                raise BridgeError.invalid_request(f"{label} must be a boolean", field=label)

        async def operation(conn: Connection) -> JobRecord:
            current = await self._fetch(conn, scope, job_id, lock=True)
            if deleted is not None and not current.status.terminal:
                raise BridgeError.invalid_request(
                    "only finished jobs can be deleted or restored",
                    field="deleted",
                    status=current.status.value,
                )
            stamp = max(now, current.updated_at)
            new_favorite = current.favorite if favorite is None else favorite
            new_deleted = current.deleted_at
            if deleted is not None:
                new_deleted = stamp if deleted else None
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
        check_timestamp(now)
        check_count(retention_secs, "retention_secs")
        check_count(max_retained, "max_retained")
        check_count(max_retained_bytes, "max_retained_bytes")
        cutoff = now - retention_secs
        t = self._t

        async def operation(conn: Connection) -> int:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._prune_key,))
            expired = await conn.execute(
                f"DELETE FROM {t} WHERE status IN {_TERMINAL_SQL} AND NOT favorite "  # noqa: S608
                "AND COALESCE(completed_at, updated_at) <= %s",
                (cutoff,),
            )
            excess = await conn.execute(
                f"WITH ranked AS (SELECT id, "  # noqa: S608
                "row_number() OVER w AS rank, SUM(logical_bytes) OVER w AS cumulative "
                f"FROM {t} WHERE status IN {_TERMINAL_SQL} AND NOT favorite "
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
            counts = {status.value: 0 for status in ImageJobStatus}
            cursor = await conn.execute(
                f"SELECT status, COUNT(*) FROM {t} GROUP BY status"  # noqa: S608
            )
            for status, count in await cursor.fetchall():
                counts[str(status)] = int(count)
            hidden = await _scalar(
                conn,
                f"SELECT COUNT(*) FROM {t} WHERE deleted_at IS NOT NULL",  # noqa: S608
            )
            logical = await _scalar(
                conn,
                f"SELECT COALESCE(SUM(logical_bytes), 0) FROM {t}",  # noqa: S608
            )
            size = await _scalar(conn, "SELECT pg_total_relation_size(%s::regclass)", (t,))
            return JobStatistics(
                total=sum(counts.values()),
                queued=counts["queued"],
                running=counts["running"],
                succeeded=counts["succeeded"],
                failed=counts["failed"],
                cancelled=counts["cancelled"],
                interrupted=counts["interrupted"],
                hidden=int(hidden),
                database_bytes=int(size),
                logical_bytes=int(logical),
            )

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
        check_scope(scope)
        shown = check_visibility(visibility)
        wanted = None if status is None else check_status(status)
        if favorite is not None and not isinstance(favorite, bool):
            raise BridgeError.invalid_request("favorite must be a boolean", field="favorite")
        needle = normalize_search(search)
        position = None if cursor is None else decode_job_cursor(cursor)
        check_limit(limit)

        clauses = ["auth_scope = %(scope)s"]
        params: dict[str, Any] = {"scope": scope, "fetch": limit + 1}
        if shown is JobVisibility.ACTIVE:
            clauses.append("deleted_at IS NULL")
        elif shown is JobVisibility.HIDDEN:
            clauses.append("deleted_at IS NOT NULL")
        if wanted is not None:
            clauses.append("status = %(status)s")
            params["status"] = wanted.value
        if favorite is not None:
            clauses.append("favorite = %(favorite)s")
            params["favorite"] = favorite
        if needle is not None:
            clauses.append("prompt_search LIKE %(pattern)s ESCAPE '\\'")
            params["pattern"] = like_contains_pattern(needle)
        if position is not None:
            clauses.append("(created_at, id) < (%(created)s, %(after_id)s)")
            params["created"], params["after_id"] = position
        sql = (
            f"SELECT {_SUMMARY_COLUMNS} FROM {self._t} WHERE "  # noqa: S608
            + " AND ".join(clauses)
            + " ORDER BY created_at DESC, id DESC LIMIT %(fetch)s"
        )

        async def operation(conn: Connection) -> JobPage:
            rows = await _rows(conn, sql, params)
            items = [_summary(row) for row in rows[:limit]]
            next_cursor = None
            if len(rows) > limit:
                last = items[-1]
                next_cursor = encode_job_cursor(last.created_at, last.id)
            return JobPage(items=items, next_cursor=next_cursor)

        return await self._db.run(operation)


async def inspect_postgres_job_schema(
    url: str, *, schema: str = DEFAULT_SCHEMA, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
) -> SchemaStatus:
    """Read-only: the job schema version in ``schema`` (nothing is created)."""
    return await inspect_postgres_schema(
        url,
        JOB_PG_SCHEMA,
        schema=schema,
        code=_CODE,
        label=_LABEL,
        connect_timeout_s=connect_timeout_s,
    )
