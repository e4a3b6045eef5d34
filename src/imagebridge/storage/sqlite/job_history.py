"""The history half of :class:`~imagebridge.storage.sqlite.jobs.SqliteJobStore`: one job or a
page of them, favourite and soft-delete marks, pruning, statistics.

Submission and the worker transitions (:mod:`.jobs`) write a job's life; this module reads and
trims what is left, so each half stays small. It also holds the row reads both halves share.
"""

from __future__ import annotations

import builtins
import sqlite3

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.storage.records import JobOrigin, JobPage, JobRecord, JobStatistics, JobVisibility
from imagebridge.storage.rows import JOB_RECORD_COLUMNS, job_page, job_record, job_statistics
from imagebridge.storage.rules.history import (
    TERMINAL_SQL,
    check_history_update,
    history_change,
    history_query,
    prune_cutoff,
)
from imagebridge.storage.rules.jobs import check_job_lookup, job_not_found
from imagebridge.storage.rules.pages import DEFAULT_PAGE_LIMIT
from imagebridge.storage.sqlite.database import SqliteDatabase
from imagebridge.storage.sqlite.queries import immediate, run_for_ids

__all__ = ["RECORD_COLUMNS", "SqliteJobHistory", "fetch_existing_job"]

RECORD_COLUMNS = ", ".join(JOB_RECORD_COLUMNS)
"""What a record reads, as SQL: every statement returning a job selects this."""


def fetch_existing_job(conn: sqlite3.Connection, scope: str, job_id: str) -> sqlite3.Row:
    """The job's row; a job in another scope is as missing as one that never was (404)."""
    row: sqlite3.Row | None = conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM image_jobs WHERE auth_scope = ? AND id = ?",  # noqa: S608
        (scope, job_id),
    ).fetchone()
    if row is None:
        raise job_not_found()
    return row


class SqliteJobHistory:
    """The history operations of :class:`~imagebridge.storage.interfaces.JobStore` (a mixin)."""

    _db: SqliteDatabase

    async def get(self, scope: str, job_id: str) -> JobRecord:
        check_job_lookup(scope, job_id)

        def operation(conn: sqlite3.Connection) -> JobRecord:
            return job_record(fetch_existing_job(conn, scope, job_id))

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

        def operation(conn: sqlite3.Connection) -> JobRecord:
            with immediate(conn):
                current = job_record(fetch_existing_job(conn, scope, job_id))
                new_favorite, new_deleted, stamp = history_change(
                    current, favorite=favorite, deleted=deleted, now=now
                )
                conn.execute(
                    "UPDATE image_jobs SET favorite = ?, deleted_at = ?, updated_at = ? "
                    "WHERE id = ?",
                    (new_favorite, new_deleted, stamp, job_id),
                )
                return job_record(fetch_existing_job(conn, scope, job_id))

        return await self._db.run(operation)

    async def prune(
        self, *, now: int, retention_secs: int, max_retained: int, max_retained_bytes: int
    ) -> int:
        """Delete old or excess terminal history in one transaction; return rows removed.

        First rows completed at or before ``now - retention_secs``; then, newest first by
        creation, every row past ``max_retained`` or past ``max_retained_bytes`` of
        cumulative logical size. Favourites are never pruned; soft-deleted rows are. A kept
        OpenAI response is removed with its record.
        """
        cutoff = prune_cutoff(
            now=now,
            retention_secs=retention_secs,
            max_retained=max_retained,
            max_retained_bytes=max_retained_bytes,
        )

        def operation(conn: sqlite3.Connection) -> int:
            with immediate(conn):
                expired = (
                    f"FROM image_jobs WHERE status IN {TERMINAL_SQL} "
                    "AND favorite = 0 AND COALESCE(completed_at, updated_at) <= ?"
                )
                conn.execute(  # a kept response goes with its record
                    f"DELETE FROM openai_responses WHERE job_id IN (SELECT id {expired})",  # noqa: S608
                    (cutoff,),
                )
                removed = conn.execute(f"DELETE {expired}", (cutoff,)).rowcount
                victims: builtins.list[str] = []
                cumulative = 0
                rows = conn.execute(
                    f"SELECT id, logical_bytes FROM image_jobs "  # noqa: S608
                    f"WHERE status IN {TERMINAL_SQL} AND favorite = 0 "
                    "ORDER BY created_at DESC, id DESC"
                )
                for rank, (job_id, size) in enumerate(rows, start=1):
                    cumulative += int(size or 0)
                    if rank > max_retained or cumulative > max_retained_bytes:
                        victims.append(str(job_id))
                run_for_ids(conn, "DELETE FROM openai_responses WHERE job_id IN ({ids})", victims)
                removed += run_for_ids(conn, "DELETE FROM image_jobs WHERE id IN ({ids})", victims)
            return int(removed)

        return await self._db.run(operation)

    async def statistics(self) -> JobStatistics:
        """Counts across every scope, the file size and the logical (budgeted) size."""

        def operation(conn: sqlite3.Connection) -> JobStatistics:
            counts = conn.execute("SELECT status, COUNT(*) FROM image_jobs GROUP BY status")
            hidden = conn.execute(
                "SELECT COUNT(*) FROM image_jobs WHERE deleted_at IS NOT NULL"
            ).fetchone()[0]
            logical = conn.execute(
                "SELECT COALESCE(SUM(logical_bytes), 0) FROM image_jobs"
            ).fetchone()[0]
            page_count = conn.execute("PRAGMA page_count").fetchone()[0]
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            return job_statistics(
                counts,
                hidden=hidden,
                database_bytes=int(page_count) * int(page_size),
                logical_bytes=logical,
            )

        return await self._db.run(operation)

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
        origin: JobOrigin | str | None = None,
    ) -> JobPage:
        """One page of the scope's history, newest first; filters apply before paging.

        ``search`` matches a literal, case-insensitive substring of the prompt (``%``,
        ``_`` and ``\\`` are ordinary characters). ``origin`` keeps one surface's records
        (``None``: jobs and synchronous records together). ``next_cursor`` is set only
        when more rows follow.
        """
        query = history_query(
            scope,
            visibility=visibility,
            status=status,
            favorite=favorite,
            search=search,
            cursor=cursor,
            limit=limit,
            origin=origin,
            placeholder=":{}",
            before_position="(created_at < :created OR (created_at = :created AND id < :after_id))",
        )
        sql = query.select("image_jobs")

        def operation(conn: sqlite3.Connection) -> JobPage:
            return job_page(conn.execute(sql, query.params).fetchall(), query.limit)

        return await self._db.run(operation)
