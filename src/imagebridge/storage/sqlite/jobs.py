"""Durable image jobs in SQLite.

Ownership: every caller-facing operation is filtered by auth scope; a job in another scope is
indistinguishable from a missing one. Accounting: each row has a *logical* size (its text
columns, a 256 KiB reserve while queued or running, else its result and error, plus 128
bytes); new work is refused when the queue or that logical budget is full, and ``prune``
keeps terminal history within its own budget. The per-row figure is cached in the
``logical_bytes`` column (kept by every write, back-filled by the migrations) so admission
sums a small index instead of reading every request body.
"""

from __future__ import annotations

import builtins
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError
from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS, JOB_STORE, StoreLifecycle
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
from imagebridge.storage.rules.pages import (
    check_queued_page,
)
from imagebridge.storage.sqlite.database import SqliteDatabase
from imagebridge.storage.sqlite.inspection import inspect_schema
from imagebridge.storage.sqlite.job_history import (
    RECORD_COLUMNS,
    SqliteJobHistory,
    fetch_existing_job,
)
from imagebridge.storage.sqlite.job_schema import JOB_SCHEMA, LOGICAL_BYTES_SQL
from imagebridge.storage.sqlite.queries import immediate, run_for_ids

__all__ = ["FinishedHook", "SqliteJobStore", "inspect_job_schema"]

FinishedHook = Callable[[sqlite3.Connection, Sequence[str]], None]
"""Called with the connection and the ids of jobs given their final status, inside that
transaction (the webhook outbox: :class:`~imagebridge.storage.sqlite.webhooks.SqliteOutbox`)."""


# -- the store -------------------------------------------------------------------------------


class SqliteJobStore(SqliteJobHistory, StoreLifecycle[SqliteDatabase]):
    """:class:`~imagebridge.storage.interfaces.JobStore` over one SQLite file.

    Calls run on the database's dedicated worker thread (see :mod:`.database`), one at a time.
    Reading and pruning history come from :class:`~.job_history.SqliteJobHistory`.
    """

    _on_finished: FinishedHook | None = None

    def __init__(
        self, database: SqliteDatabase, *, max_result_bytes: int, max_error_bytes: int
    ) -> None:
        self._db = database
        self._max_result_bytes = max_result_bytes
        self._max_error_bytes = max_error_bytes

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        max_result_bytes: int = MAX_RESULT_JSON_BYTES,
        max_error_bytes: int = MAX_ERROR_JSON_BYTES,
    ) -> Self:
        """Open or create the database at ``path`` and bring its schema to version 4."""
        check_body_limits(max_result_bytes, max_error_bytes)
        database = await SqliteDatabase.open(
            path,
            store_schema=JOB_SCHEMA,
            code=JOB_STORE.code,
            label=JOB_STORE.label,
            busy_timeout_ms=busy_timeout_ms,
        )
        store = cls(
            database,
            max_result_bytes=max_result_bytes,
            max_error_bytes=max_error_bytes,
        )
        await database.run(store._prepare_connection)
        return store

    @staticmethod
    def _prepare_connection(conn: sqlite3.Connection) -> None:
        conn.row_factory = sqlite3.Row

    @staticmethod
    def _refresh_bytes(conn: sqlite3.Connection, ids: builtins.list[str]) -> None:
        run_for_ids(
            conn,
            f"UPDATE image_jobs SET logical_bytes = {LOGICAL_BYTES_SQL} "  # noqa: S608
            "WHERE id IN ({ids})",
            ids,
        )

    def on_finished(self, hook: FinishedHook | None) -> None:
        """Run ``hook`` in every transaction that gives jobs their final status."""
        self._on_finished = hook

    def _finished(self, conn: sqlite3.Connection, ids: Sequence[str]) -> None:
        if self._on_finished is not None and ids:
            self._on_finished(conn, ids)

    @property
    def path(self) -> Path:
        return self._db.path

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
    ) -> CreateResult:
        """Insert a queued job, or replay the job an earlier identical submission made.

        Idempotency is decided before capacity, so a replay succeeds even when the queue is
        full; a refused submission stores nothing.
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

        def operation(conn: sqlite3.Connection) -> CreateResult:
            # Serializing a large request happens here, on the worker thread.
            request_text, search, new_bytes = prepare_submission(
                request_json,
                prompt,
                job_id=job_id,
                scope=scope,
                key_hash=key_hash,
                fingerprint=fingerprint,
            )
            with immediate(conn):
                if key_hash is not None:
                    existing = conn.execute(
                        f"SELECT {RECORD_COLUMNS} FROM image_jobs "  # noqa: S608
                        "WHERE auth_scope = ? AND submission_key_hash = ?",
                        (scope, key_hash),
                    ).fetchone()
                    if existing is not None:
                        return replayed(job_record(existing), fingerprint)
                queued = conn.execute(
                    "SELECT COUNT(*) FROM image_jobs WHERE status = 'queued'"
                ).fetchone()[0]
                used = conn.execute(
                    "SELECT COALESCE(SUM(logical_bytes), 0) FROM image_jobs"
                ).fetchone()[0]
                check_capacity(
                    queued,
                    used,
                    new_bytes,
                    max_pending=max_pending,
                    max_database_bytes=max_database_bytes,
                )
                if conn.execute("SELECT 1 FROM image_jobs WHERE id = ?", (job_id,)).fetchone():
                    raise job_id_taken()
                conn.execute(
                    "INSERT INTO image_jobs (id, auth_scope, status, created_at, updated_at, "
                    "partial_images, cancel_requested, favorite, submission_key_hash, "
                    "request_fingerprint, logical_bytes, prompt_search, request_json) "
                    "VALUES (?, ?, 'queued', ?, ?, 0, 0, 0, ?, ?, ?, ?, ?)",
                    (
                        job_id,
                        scope,
                        now,
                        now,
                        key_hash,
                        fingerprint,
                        new_bytes,
                        search,
                        request_text,
                    ),
                )
                row = fetch_existing_job(conn, scope, job_id)
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
        record an earlier request with the same ``sync_key`` made.

        The row is ``running`` at stage ``starting`` from the start: nothing queues it. A
        keyed record another request made is returned (``created`` false) when its
        fingerprint matches, else 409 ``idempotency_conflict``. No queue or byte budget
        applies (a synchronous request's record is small: its inline inputs are the
        caller's). ``lease`` is for a shared store (``(instance, lease_secs)``); a plain
        store's records are recovered ``interrupted`` at its next start instead.
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

        def operation(conn: sqlite3.Connection) -> CreateResult:
            request_text, search, new_bytes = prepare_submission(
                request_json,
                prompt,
                job_id=record_id,
                scope=scope,
                key_hash=key_hash,
                fingerprint=fingerprint,
            )
            with immediate(conn):
                if key_hash is not None:
                    existing = conn.execute(
                        f"SELECT {RECORD_COLUMNS} FROM image_jobs "  # noqa: S608
                        "WHERE auth_scope = ? AND submission_key_hash = ?",
                        (scope, key_hash),
                    ).fetchone()
                    if existing is not None:
                        return replayed(job_record(existing), fingerprint)
                if conn.execute("SELECT 1 FROM image_jobs WHERE id = ?", (record_id,)).fetchone():
                    raise job_id_taken()
                conn.execute(
                    "INSERT INTO image_jobs (id, auth_scope, origin, status, created_at, "
                    "updated_at, started_at, progress_stage, partial_images, cancel_requested, "
                    "favorite, submission_key_hash, request_fingerprint, logical_bytes, "
                    "prompt_search, request_json) VALUES (?, ?, ?, 'running', ?, ?, ?, "
                    "'starting', 0, 0, 0, ?, ?, ?, ?, ?)",
                    (
                        record_id,
                        scope,
                        checked.value,
                        now,
                        now,
                        now,
                        key_hash,
                        fingerprint,
                        new_bytes,
                        search,
                        request_text,
                    ),
                )
                self._lease_record(conn, record_id, lease, now)
                row = fetch_existing_job(conn, scope, record_id)
            return CreateResult(job=job_record(row), created=True)

        return await self._db.run(operation)

    def _lease_record(
        self, conn: sqlite3.Connection, record_id: str, lease: tuple[str, int] | None, now: int
    ) -> None:
        """A plain store keeps no leases (the shared store overrides this)."""

    async def find_retry(
        self, scope: str, origin: JobOrigin | str, fingerprint: str, *, since: int
    ) -> JobRecord | None:
        """The newest record of ``scope`` that ``origin`` made for this request fingerprint
        at or after ``since`` (what a marked retry repeats), or ``None``."""
        checked = check_retry_lookup(scope, origin, fingerprint, since)

        def operation(conn: sqlite3.Connection) -> JobRecord | None:
            row = conn.execute(
                f"SELECT {RECORD_COLUMNS} FROM image_jobs "  # noqa: S608
                "WHERE auth_scope = ? AND request_fingerprint = ? AND created_at >= ? "
                "AND origin = ? ORDER BY created_at DESC, id DESC LIMIT 1",
                (scope, fingerprint, since, checked.value),
            ).fetchone()
            return None if row is None else job_record(row)

        return await self._db.run(operation)

    # -- worker transitions --------------------------------------------------------------

    async def claim(self, scope: str, job_id: str, *, now: int) -> bool:
        """queued (and not cancel-requested) → running at stage ``starting``."""
        check_transition(scope, now)

        def operation(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE image_jobs SET status = 'running', progress_stage = 'starting', "
                "started_at = MAX(?, updated_at), updated_at = MAX(?, updated_at) "
                "WHERE auth_scope = ? AND id = ? AND status = 'queued' AND cancel_requested = 0",
                (now, now, scope, job_id),
            )
            return cursor.rowcount == 1

        return await self._db.run(operation)

    async def progress(
        self, scope: str, job_id: str, *, stage: str, partial_images: int, now: int
    ) -> bool:
        """Record the latest stage of a running job; other states are left alone."""
        check_progress(scope, stage, partial_images, now)

        def operation(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE image_jobs SET progress_stage = ?, partial_images = ?, "
                "updated_at = MAX(?, updated_at) "
                "WHERE auth_scope = ? AND id = ? AND status = 'running'",
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
        limit = self._max_result_bytes

        def operation(conn: sqlite3.Connection) -> JobRecord:
            text = prepare_result(response_json, limit)
            return self._finish(conn, scope, job_id, ImageJobStatus.SUCCEEDED, text, None, now)

        return await self._db.run(operation)

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
        limit = self._max_error_bytes

        def operation(conn: sqlite3.Connection) -> JobRecord:
            text = prepare_error(error_json, limit)
            return self._finish(conn, scope, job_id, final, None, text, now, forget_key)

        return await self._db.run(operation)

    def _finish(
        self,
        conn: sqlite3.Connection,
        scope: str,
        job_id: str,
        status: ImageJobStatus,
        response_text: str | None,
        error_text: str | None,
        now: int,
        forget_key: bool = False,
    ) -> JobRecord:
        with immediate(conn):
            stamp = check_finishable(job_record(fetch_existing_job(conn, scope, job_id)), now)
            conn.execute(
                "UPDATE image_jobs SET status = ?, response_json = ?, error_json = ?, "
                "completed_at = ?, updated_at = ?, progress_stage = 'completed', "
                "submission_key_hash = CASE WHEN ? THEN NULL ELSE submission_key_hash END "
                "WHERE id = ?",
                (status.value, response_text, error_text, stamp, stamp, forget_key, job_id),
            )
            self._refresh_bytes(conn, [job_id])
            self._finished(conn, [job_id])
            return job_record(fetch_existing_job(conn, scope, job_id))

    async def request_cancel(self, scope: str, job_id: str, *, now: int) -> JobRecord:
        """Queued → cancelled at once; running → flagged for its worker; terminal → as is."""
        check_transition(scope, now)

        def operation(conn: sqlite3.Connection) -> JobRecord:
            with immediate(conn):
                current = job_record(fetch_existing_job(conn, scope, job_id))
                step = cancel_step(current)
                stamp = max(now, current.updated_at)
                if step is CancelStep.CANCEL:
                    conn.execute(
                        "UPDATE image_jobs SET status = 'cancelled', cancel_requested = 1, "
                        "completed_at = ?, updated_at = ?, progress_stage = 'completed' "
                        "WHERE id = ?",
                        (stamp, stamp, job_id),
                    )
                    self._refresh_bytes(conn, [job_id])
                    self._finished(conn, [job_id])
                elif step is CancelStep.FLAG:
                    conn.execute(
                        "UPDATE image_jobs SET cancel_requested = 1, updated_at = ? WHERE id = ?",
                        (stamp, job_id),
                    )
                else:
                    return current
                return job_record(fetch_existing_job(conn, scope, job_id))

        return await self._db.run(operation)

    async def recover_interrupted(self, *, now: int) -> int:
        """Every running row (left by a stopped bridge) → interrupted; never re-run.

        The progress stage is left as it was, so history shows how far the job got.
        """
        error_text = prepare_interruption(now)

        def operation(conn: sqlite3.Connection) -> int:
            with immediate(conn):
                ids = [
                    str(row[0])
                    for row in conn.execute("SELECT id FROM image_jobs WHERE status = 'running'")
                ]
                conn.execute(
                    "UPDATE image_jobs SET status = 'interrupted', error_json = ?, "
                    "completed_at = MAX(?, updated_at), updated_at = MAX(?, updated_at) "
                    "WHERE status = 'running'",
                    (error_text, now, now),
                )
                self._refresh_bytes(conn, ids)
                self._finished(conn, ids)
            return len(ids)

        return await self._db.run(operation)

    async def queued_identities(
        self, limit: int, *, after: JobIdentity | None = None
    ) -> builtins.list[JobIdentity]:
        """Queued jobs across scopes, oldest first; pass the last one as ``after`` to page on.

        Paging lets a manager schedule every queued job, however many there are.
        """
        check_queued_page(limit, after)

        def operation(conn: sqlite3.Connection) -> builtins.list[JobIdentity]:
            if after is None:
                rows = conn.execute(
                    "SELECT auth_scope, id, created_at FROM image_jobs WHERE status = 'queued' "
                    "ORDER BY created_at, id LIMIT ?",
                    (limit,),
                )
            else:
                rows = conn.execute(
                    "SELECT auth_scope, id, created_at FROM image_jobs WHERE status = 'queued' "
                    "AND (created_at > ? OR (created_at = ? AND id > ?)) "
                    "ORDER BY created_at, id LIMIT ?",
                    (after.created_at, after.created_at, after.id, limit),
                )
            return [job_identity(row) for row in rows]

        return await self._db.run(operation)

    async def healthy(self) -> bool:
        """Whether the store still answers queries (for readiness)."""

        def operation(conn: sqlite3.Connection) -> bool:
            conn.execute("SELECT 1 FROM image_jobs LIMIT 1").fetchall()
            return True

        try:
            return await self._db.run(operation)
        except BridgeError:
            return False


async def inspect_job_schema(path: str | os.PathLike[str]) -> SchemaStatus:
    """Read-only: the job schema version of ``path`` (a missing file is not created)."""
    return await inspect_schema(path, JOB_SCHEMA, code=JOB_STORE.code, label=JOB_STORE.label)
