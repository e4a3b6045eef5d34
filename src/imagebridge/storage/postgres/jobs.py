"""Durable image jobs in PostgreSQL: the :class:`JobStore` operations on the jobs table.

Same behaviour as :class:`~imagebridge.storage.sqlite.jobs.SqliteJobStore`: the same checks
from :mod:`imagebridge.storage.rules`, the same errors, cursors, idempotency and logical-bytes
accounting. Where SQLite serializes writers with ``BEGIN IMMEDIATE``, this store takes a
transaction-scoped advisory lock around admission (so ``max_pending`` and the byte budget hold
across instances) and around pruning, and row locks everywhere else.

The table (:mod:`.job_schema`) holds each job's route and lease too: ``create`` records the
provider a job routes to, and
:class:`~imagebridge.storage.postgres.shared_queue.PostgresSharedJobStore` adds the
shared-queue primitives on top of :class:`PostgresJobStore`, as
:class:`~imagebridge.storage.sqlite.shared_queue.SqliteSharedJobStore` does on top of
:class:`~imagebridge.storage.sqlite.jobs.SqliteJobStore`.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Self, Unpack

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError
from imagebridge.storage.lifecycle import JOB_STORE, StoreLifecycle
from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.inspection import inspect_schema
from imagebridge.storage.postgres.job_history import RECORD_COLUMNS, PostgresJobHistory
from imagebridge.storage.postgres.job_schema import JOB_SCHEMA
from imagebridge.storage.postgres.queries import advisory_key, fetch_row, fetch_value
from imagebridge.storage.postgres.url import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_SCHEMA,
    ConnectOptions,
)
from imagebridge.storage.records import (
    CreateResult,
    JobIdentity,
    JobOrigin,
    JobRecord,
    JsonInput,
    SchemaStatus,
)
from imagebridge.storage.rows import (
    job_identity,
    job_record,
)
from imagebridge.storage.rules.jobs import (
    MAX_ERROR_JSON_BYTES,
    MAX_RESULT_JSON_BYTES,
    CancelStep,
    cancel_step,
    check_body_limits,
    check_capacity,
    check_failure,
    check_finishable,
    check_progress,
    check_record,
    check_retry_lookup,
    check_submission,
    check_transition,
    job_id_taken,
    prepare_error,
    prepare_interruption,
    prepare_result,
    prepare_submission,
    replayed,
)
from imagebridge.storage.rules.pages import check_queued_page
from imagebridge.storage.rules.queue import check_provider, check_record_lease

__all__ = ["FinishedHook", "PostgresJobStore", "inspect_job_schema"]

FinishedHook = Callable[[Connection, Sequence[str]], Awaitable[None]]
"""Awaited with the connection and the ids of jobs given their final status, inside that
transaction (the webhook outbox: :class:`~imagebridge.storage.postgres.webhooks.PostgresOutbox`)."""


class PostgresJobStore(PostgresJobHistory, StoreLifecycle[PostgresDatabase]):
    """:class:`~imagebridge.storage.interfaces.JobStore` over one PostgreSQL schema.

    Open :class:`~imagebridge.storage.postgres.shared_queue.PostgresSharedJobStore` (what
    ``open_job_store`` returns): it is this store plus the shared-queue primitives. Reading and
    pruning history come from :class:`~.job_history.PostgresJobHistory`.
    """

    _on_finished: FinishedHook | None = None

    def __init__(
        self, database: PostgresDatabase, *, max_result_bytes: int, max_error_bytes: int
    ) -> None:
        self._db = database
        self._max_result_bytes = max_result_bytes
        self._max_error_bytes = max_error_bytes
        self._t = database.table("image_jobs")
        self._admission_key = advisory_key(database.schema, "jobs:admission")
        self._prune_key = advisory_key(database.schema, "jobs:prune")

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        max_result_bytes: int = MAX_RESULT_JSON_BYTES,
        max_error_bytes: int = MAX_ERROR_JSON_BYTES,
        **options: Unpack[ConnectOptions],
    ) -> Self:
        """Connect to ``url``, create or migrate the jobs table in ``schema``, open a pool."""
        check_body_limits(max_result_bytes, max_error_bytes)
        database = await PostgresDatabase.open_store(url, JOB_STORE, JOB_SCHEMA, **options)
        return cls(database, max_result_bytes=max_result_bytes, max_error_bytes=max_error_bytes)

    def on_finished(self, hook: FinishedHook | None) -> None:
        """Run ``hook`` in every transaction that gives jobs their final status."""
        self._on_finished = hook

    async def _finished(self, conn: Connection, ids: Sequence[str]) -> None:
        if self._on_finished is not None and ids:
            await self._on_finished(conn, ids)

    @property
    def schema(self) -> str:
        return self._db.schema

    @property
    def max_result_bytes(self) -> int:
        return self._max_result_bytes

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
        provider ``claim_next`` routes by (``None``: any instance may claim the job).
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
                existing = await fetch_row(
                    conn,
                    f"SELECT {RECORD_COLUMNS} FROM {t} "  # noqa: S608
                    "WHERE auth_scope = %s AND submission_key_hash = %s",
                    (scope, key_hash),
                )
                if existing is not None:
                    return replayed(job_record(existing), fingerprint)
            queued = await fetch_value(
                conn,
                f"SELECT COUNT(*) FROM {t} WHERE status = 'queued'",  # noqa: S608
            )
            used = await fetch_value(
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
            if await fetch_value(conn, f"SELECT 1 FROM {t} WHERE id = %s", (job_id,)):  # noqa: S608
                raise job_id_taken()
            row = await fetch_row(
                conn,
                f"INSERT INTO {t} (id, auth_scope, status, created_at, updated_at, "  # noqa: S608
                "partial_images, cancel_requested, favorite, submission_key_hash, "
                "request_fingerprint, provider, prompt_search, request_json) "
                "VALUES (%s, %s, 'queued', %s, %s, 0, false, false, %s, %s, %s, %s, %s) "
                f"RETURNING {RECORD_COLUMNS}",
                (job_id, scope, now, now, key_hash, fingerprint, route, search, request_text),
            )
            assert row is not None
            return CreateResult(job=job_record(row), created=True)

        return await self._db.run(operation)

    # -- synchronous records ---------------------------------------------------------------

    async def open_record(
        self,
        scope: str,
        record_id: str,
        request_json: JsonInput,
        prompt: str,
        *,
        origin: JobOrigin | str,
        fingerprint: str,
        sync_key: str | None = None,
        now: int,
        lease: tuple[str, int] | None = None,
    ) -> CreateResult:
        """Record a synchronous request that starts running in-process now, or find the
        record an earlier request with the same ``sync_key`` made (as
        :meth:`~imagebridge.storage.sqlite.jobs.SqliteJobStore.open_record`).

        A keyed insert and a concurrent one on another instance meet at the unique index:
        the loser finds the winner's row. ``lease`` (``(instance, lease_secs)``) puts the
        record under that instance's lease, renewed by its heartbeat like a claimed job's.
        """
        checked, key_hash = check_record(
            scope,
            record_id,
            prompt,
            origin=origin,
            sync_key=sync_key,
            fingerprint=fingerprint,
            now=now,
        )
        owner, deadline = (None, None) if lease is None else check_record_lease(lease, now)
        request_text, search, _ = await asyncio.to_thread(
            prepare_submission,
            request_json,
            prompt,
            job_id=record_id,
            scope=scope,
            key_hash=key_hash,
            fingerprint=fingerprint,
        )
        t = self._t

        async def operation(conn: Connection) -> CreateResult:
            row = await fetch_row(
                conn,
                f"INSERT INTO {t} (id, auth_scope, origin, status, created_at, updated_at, "  # noqa: S608
                "started_at, progress_stage, partial_images, cancel_requested, favorite, "
                "submission_key_hash, request_fingerprint, lease_owner, lease_expires_at, "
                "prompt_search, request_json) VALUES (%s, %s, %s, 'running', %s, %s, %s, "
                "'starting', 0, false, false, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING "
                f"RETURNING {RECORD_COLUMNS}",
                (
                    record_id,
                    scope,
                    checked.value,
                    now,
                    now,
                    now,
                    key_hash,
                    fingerprint,
                    owner,
                    deadline,
                    search,
                    request_text,
                ),
            )
            if row is not None:
                return CreateResult(job=job_record(row), created=True)
            if key_hash is not None:
                existing = await fetch_row(
                    conn,
                    f"SELECT {RECORD_COLUMNS} FROM {t} "  # noqa: S608
                    "WHERE auth_scope = %s AND submission_key_hash = %s",
                    (scope, key_hash),
                )
                if existing is not None:
                    return replayed(job_record(existing), fingerprint)
            raise job_id_taken()

        return await self._db.run(operation)

    async def find_retry(
        self, scope: str, origin: JobOrigin | str, fingerprint: str, *, since: int
    ) -> JobRecord | None:
        """The newest record of ``scope`` that ``origin`` made for this request fingerprint
        at or after ``since`` (what a marked retry repeats), or ``None``."""
        checked = check_retry_lookup(scope, origin, fingerprint, since)

        async def operation(conn: Connection) -> JobRecord | None:
            row = await fetch_row(
                conn,
                f"SELECT {RECORD_COLUMNS} FROM {self._t} "  # noqa: S608
                "WHERE auth_scope = %s AND request_fingerprint = %s AND created_at >= %s "
                "AND origin = %s ORDER BY created_at DESC, id DESC LIMIT 1",
                (scope, fingerprint, since, checked.value),
            )
            return None if row is None else job_record(row)

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
        forget_key: bool = False,
    ) -> JobRecord:
        """running → failed | cancelled | interrupted with its error (oversized → replaced).

        ``forget_key``: a synchronous record whose outcome is known (nothing was paid for)
        drops its idempotency key, so a retry with that key runs again.
        """
        final = check_failure(scope, status, now)
        text = await asyncio.to_thread(prepare_error, error_json, self._max_error_bytes)
        return await self._finish(scope, job_id, final, None, text, now, forget_key)

    async def _finish(
        self,
        scope: str,
        job_id: str,
        status: ImageJobStatus,
        response_text: str | None,
        error_text: str | None,
        now: int,
        forget_key: bool = False,
    ) -> JobRecord:
        async def operation(conn: Connection) -> JobRecord:
            stamp = check_finishable(await self._fetch(conn, scope, job_id, lock=True), now)
            row = await fetch_row(
                conn,
                f"UPDATE {self._t} SET status = %s, response_json = %s, "  # noqa: S608
                "error_json = %s, completed_at = %s, updated_at = %s, "
                "progress_stage = 'completed', submission_key_hash = CASE WHEN %s THEN NULL "
                f"ELSE submission_key_hash END WHERE id = %s RETURNING {RECORD_COLUMNS}",
                (status.value, response_text, error_text, stamp, stamp, forget_key, job_id),
            )
            assert row is not None
            await self._finished(conn, [job_id])
            return job_record(row)

        return await self._db.run(operation)

    async def request_cancel(self, scope: str, job_id: str, *, now: int) -> JobRecord:
        """Queued → cancelled at once; running → flagged for its worker; terminal → as is.

        The flag is durable: the instance running the job sees it through
        ``heartbeat`` even if it misses the ``cancel_requested`` notification.
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
                    f"WHERE id = %s RETURNING {RECORD_COLUMNS}"
                )
                params: tuple[Any, ...] = (stamp, stamp, job_id)
            elif step is CancelStep.FLAG:
                sql = (
                    f"UPDATE {t} SET cancel_requested = true, updated_at = %s "  # noqa: S608
                    f"WHERE id = %s RETURNING {RECORD_COLUMNS}"
                )
                params = (stamp, job_id)
            else:
                return current
            row = await fetch_row(conn, sql, params)
            assert row is not None
            if step is CancelStep.CANCEL:
                await self._finished(conn, [job_id])
            return job_record(row)

        return await self._db.run(operation)

    async def recover_interrupted(self, *, now: int) -> int:
        """Every running row → interrupted; never re-run. For a single instance's restart.

        This marks *every* running job, other instances' live ones included: a shared
        deployment calls ``expire_leases`` instead. The progress stage is kept.
        """
        error_text = prepare_interruption(now)

        async def operation(conn: Connection) -> int:
            cursor = await conn.execute(
                f"UPDATE {self._t} SET status = 'interrupted', error_json = %s, "  # noqa: S608
                "completed_at = GREATEST(%s, updated_at), updated_at = GREATEST(%s, updated_at) "
                "WHERE status = 'running' RETURNING id",
                (error_text, now, now),
            )
            ids = [str(row[0]) for row in await cursor.fetchall()]
            await self._finished(conn, ids)
            return len(ids)

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

    async def healthy(self) -> bool:
        """Whether the store still answers queries (for readiness)."""

        async def operation(conn: Connection) -> bool:
            await conn.execute(f"SELECT 1 FROM {self._t} LIMIT 1")  # noqa: S608
            return True

        try:
            return await self._db.run(operation)
        except BridgeError:
            return False


async def inspect_job_schema(
    url: str, *, schema: str = DEFAULT_SCHEMA, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
) -> SchemaStatus:
    """Read-only: the job schema version in ``schema`` (nothing is created)."""
    return await inspect_schema(
        url,
        JOB_SCHEMA,
        schema=schema,
        code=JOB_STORE.code,
        label=JOB_STORE.label,
        connect_timeout_s=connect_timeout_s,
    )
