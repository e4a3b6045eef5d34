"""Database rows → plain records, the same way for both backends.

Each backend keeps its own statements; what it selects is named here (the column lists), and
what it read becomes a record here, so a row means the same thing whatever the backend:
flags become ``bool``, counts ``int``, a page's extra row becomes its ``next_cursor``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.storage.cursors import encode_job_cursor, encode_preset_cursor
from imagebridge.storage.records import (
    JobIdentity,
    JobOrigin,
    JobPage,
    JobRecord,
    JobStatistics,
    JobSummary,
    LeaseRenewal,
    PresetPage,
    PresetRecord,
)

__all__ = [
    "JOB_RECORD_COLUMNS",
    "JOB_SUMMARY_COLUMNS",
    "PRESET_COLUMNS",
    "Row",
    "counts_by_name",
    "job_identity",
    "job_page",
    "job_record",
    "job_statistics",
    "job_summary",
    "lease_renewal",
    "preset_page",
    "preset_record",
]


class Row(Protocol):
    """A result row addressed by column name: ``sqlite3.Row`` or a psycopg ``dict_row``."""

    def __getitem__(self, key: str, /) -> Any: ...


# -- jobs ------------------------------------------------------------------------------------

JOB_RECORD_COLUMNS = (
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
    "origin",
)
"""What :func:`job_record` reads, in the order both backends select it."""

JOB_SUMMARY_COLUMNS = (
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
"""What :func:`job_summary` reads: no request, result or error bodies."""


def job_record(row: Row, *, provider: str | None = None) -> JobRecord:
    """A job row (:data:`JOB_RECORD_COLUMNS`) as a record; flags become ``bool``."""
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
        provider=provider,
        origin=JobOrigin(row["origin"]),
    )


def job_summary(row: Row) -> JobSummary:
    """A listed job row (:data:`JOB_SUMMARY_COLUMNS`) as a summary."""
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


def job_page(rows: Sequence[Row], limit: int) -> JobPage:
    """A page from ``limit + 1`` fetched rows: the extra row only says that more follow."""
    items = [job_summary(row) for row in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = items[-1]
        next_cursor = encode_job_cursor(last.created_at, last.id)
    return JobPage(items=items, next_cursor=next_cursor)


def job_identity(row: Sequence[Any]) -> JobIdentity:
    """An ``auth_scope, id, created_at`` row as a queued job's identity."""
    auth_scope, job_id, created_at = row
    return JobIdentity(auth_scope=auth_scope, id=job_id, created_at=int(created_at))


def job_statistics(
    status_counts: Iterable[tuple[Any, Any]],
    *,
    hidden: Any,
    database_bytes: Any,
    logical_bytes: Any,
) -> JobStatistics:
    """Statistics from ``(status, count)`` rows and the backend's totals."""
    counts = {status.value: 0 for status in ImageJobStatus}
    for status, count in status_counts:
        counts[str(status)] = int(count)
    return JobStatistics(
        total=sum(counts.values()),
        queued=counts["queued"],
        running=counts["running"],
        succeeded=counts["succeeded"],
        failed=counts["failed"],
        cancelled=counts["cancelled"],
        interrupted=counts["interrupted"],
        hidden=int(hidden),
        database_bytes=int(database_bytes),
        logical_bytes=int(logical_bytes),
    )


# -- the shared queue ------------------------------------------------------------------------


def lease_renewal(rows: Iterable[Sequence[Any]]) -> LeaseRenewal:
    """A heartbeat's outcome from the renewed ``(job_id, cancel_requested)`` rows."""
    found = [(str(row[0]), bool(row[1])) for row in rows]
    return LeaseRenewal(
        renewed=frozenset(job_id for job_id, _ in found),
        cancel_requested=frozenset(job_id for job_id, flagged in found if flagged),
    )


def counts_by_name(rows: Iterable[Sequence[Any]]) -> dict[str, int]:
    """``(name, count)`` rows (jobs per lease owner or per provider) as a mapping."""
    return {str(row[0]): int(row[1]) for row in rows}


# -- presets ---------------------------------------------------------------------------------

PRESET_COLUMNS = "name, description, template_json, created_at, updated_at"
"""What :func:`preset_record` reads, in this order."""


def preset_record(row: Sequence[Any]) -> PresetRecord:
    """A :data:`PRESET_COLUMNS` row as a record."""
    name, description, template_json, created_at, updated_at = row
    return PresetRecord(
        name=name,
        description=description,
        template_json=template_json,
        created_at=int(created_at),
        updated_at=int(updated_at),
    )


def preset_page(rows: Sequence[Sequence[Any]], limit: int) -> PresetPage:
    """A page from ``limit + 1`` fetched preset rows (see :func:`job_page`)."""
    items = [preset_record(row) for row in rows[:limit]]
    next_cursor = encode_preset_cursor(items[-1].name) if len(rows) > limit else None
    return PresetPage(items=items, next_cursor=next_cursor)
