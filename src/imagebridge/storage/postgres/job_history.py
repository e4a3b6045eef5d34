"""The history half of :class:`~imagebridge.storage.postgres.jobs.PostgresJobStore`: one job
or a page of them, favourite and soft-delete marks, pruning, statistics.

Submission and the worker transitions (:mod:`.jobs`) write a job's life; this module reads and
trims what is left, so each half stays small. It also holds the row read both halves share.
"""

from __future__ import annotations

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.queries import fetch_row, fetch_rows, fetch_value
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

__all__ = ["RECORD_COLUMNS", "PostgresJobHistory"]

RECORD_COLUMNS = ", ".join(JOB_RECORD_COLUMNS)
"""What a record reads, as SQL: every statement returning a job selects this."""


class PostgresJobHistory:
    """The history operations of :class:`~imagebridge.storage.interfaces.JobStore` (a mixin)."""

    _db: PostgresDatabase
    _t: str
    _prune_key: int

    async def _fetch(self, conn: Connection, scope: str, job_id: str, *, lock: bool) -> JobRecord:
        row = await fetch_row(
            conn,
            f"SELECT {RECORD_COLUMNS} FROM {self._t} "  # noqa: S608
            "WHERE auth_scope = %s AND id = %s" + (" FOR UPDATE" if lock else ""),
            (scope, job_id),
        )
        if row is None:
            raise job_not_found()
        return job_record(row)

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
            row = await fetch_row(
                conn,
                f"UPDATE {self._t} SET favorite = %s, deleted_at = %s, updated_at = %s "  # noqa: S608
                f"WHERE id = %s RETURNING {RECORD_COLUMNS}",
                (new_favorite, new_deleted, stamp, job_id),
            )
            assert row is not None
            return job_record(row)

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
        t = self._t
        responses = self._db.table("openai_responses")

        async def operation(conn: Connection) -> int:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._prune_key,))
            # A kept OpenAI response goes with its record (the ids each delete returns).
            with_responses = (
                f", kept AS (DELETE FROM {responses} WHERE job_id IN (SELECT id FROM gone)) "  # noqa: S608
                "SELECT COUNT(*) FROM gone"
            )
            expired = await conn.execute(
                f"WITH gone AS (DELETE FROM {t} WHERE status IN {TERMINAL_SQL} "  # noqa: S608
                "AND NOT favorite AND COALESCE(completed_at, updated_at) <= %s RETURNING id)"
                + with_responses,
                (cutoff,),
            )
            excess = await conn.execute(
                f"WITH ranked AS (SELECT id, "  # noqa: S608
                "row_number() OVER w AS rank, SUM(logical_bytes) OVER w AS cumulative "
                f"FROM {t} WHERE status IN {TERMINAL_SQL} AND NOT favorite "
                "WINDOW w AS (ORDER BY created_at DESC, id DESC "
                "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)), "
                f"gone AS (DELETE FROM {t} AS j USING ranked WHERE j.id = ranked.id "
                "AND (ranked.rank > %s OR ranked.cumulative > %s) RETURNING j.id)" + with_responses,
                (max_retained, max_retained_bytes),
            )
            counted = [await expired.fetchone(), await excess.fetchone()]
            return sum(int(row[0]) for row in counted if row is not None)

        return await self._db.run(operation)

    async def statistics(self) -> JobStatistics:
        """Counts across every scope, the table's size on disk and the logical size."""
        t = self._t

        async def operation(conn: Connection) -> JobStatistics:
            cursor = await conn.execute(
                f"SELECT status, COUNT(*) FROM {t} GROUP BY status"  # noqa: S608
            )
            counts = await cursor.fetchall()
            hidden = await fetch_value(
                conn,
                f"SELECT COUNT(*) FROM {t} WHERE deleted_at IS NOT NULL",  # noqa: S608
            )
            logical = await fetch_value(
                conn,
                f"SELECT COALESCE(SUM(logical_bytes), 0) FROM {t}",  # noqa: S608
            )
            size = await fetch_value(conn, "SELECT pg_total_relation_size(%s::regclass)", (t,))
            return job_statistics(counts, hidden=hidden, database_bytes=size, logical_bytes=logical)

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
            placeholder="%({})s",
            before_position="(created_at, id) < (%(created)s, %(after_id)s)",
        )
        sql = query.select(self._t)

        async def operation(conn: Connection) -> JobPage:
            return job_page(await fetch_rows(conn, sql, query.params), query.limit)

        return await self._db.run(operation)
