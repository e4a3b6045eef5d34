"""History rules: listing filters, literal search, the page's SQL conditions, updates, pruning.

:func:`history_query` checks a ``list`` call and builds its conditions for either SQL dialect,
so both backends filter, search and page alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError
from imagebridge.storage.cursors import decode_job_cursor
from imagebridge.storage.records import JobOrigin, JobRecord, JobVisibility
from imagebridge.storage.rows import JOB_SUMMARY_COLUMNS
from imagebridge.storage.rules.jobs import check_origin, check_scope, prompt_search_text
from imagebridge.storage.rules.pages import check_limit
from imagebridge.storage.rules.values import (
    check_count,
    check_timestamp,
    has_control_characters,
    utf8_size,
)

__all__ = [
    "MAX_SEARCH_BYTES",
    "TERMINAL_SQL",
    "HistoryQuery",
    "check_history_update",
    "check_status",
    "check_visibility",
    "history_change",
    "history_query",
    "like_contains_pattern",
    "normalize_search",
    "prune_cutoff",
]

MAX_SEARCH_BYTES = 512

TERMINAL_SQL = "('succeeded', 'failed', 'cancelled', 'interrupted')"
"""The finished statuses as an SQL list, valid in both dialects."""


# -- filters and search ----------------------------------------------------------------------


def check_status(status: str) -> ImageJobStatus:
    try:
        return ImageJobStatus(status)
    except ValueError:
        raise BridgeError.invalid_request("unknown durable job status", field="status") from None


def check_visibility(visibility: str) -> JobVisibility:
    try:
        return JobVisibility(visibility)
    except ValueError:
        raise BridgeError.invalid_request(
            "visibility must be active, hidden or all", field="visibility"
        ) from None


def normalize_search(search: str | None) -> str | None:
    """Trimmed, checked, lower-cased search text; ``None`` when there is nothing to match."""
    if search is None:
        return None
    if not isinstance(search, str):
        raise BridgeError.invalid_request("search must be text", field="search")
    trimmed = search.strip()
    if not trimmed:
        return None
    size = utf8_size(trimmed)
    if size is None or size > MAX_SEARCH_BYTES or has_control_characters(trimmed):
        raise BridgeError.invalid_request(
            f"search must be at most {MAX_SEARCH_BYTES} bytes without control characters",
            field="search",
        )
    return prompt_search_text(trimmed)


def like_contains_pattern(needle: str, escape: str = "\\") -> str:
    """A LIKE pattern matching ``needle`` literally anywhere (``%``, ``_``, escape escaped)."""
    escaped = (
        needle.replace(escape, escape + escape)
        .replace("%", escape + "%")
        .replace("_", escape + "_")
    )
    return f"%{escaped}%"


# -- listing ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """A checked history listing: its SQL conditions, their named parameters, the page size.

    ``params["fetch"]`` is ``limit + 1``: the extra row tells
    :func:`~imagebridge.storage.rows.job_page` more follow.
    """

    where: str
    params: dict[str, Any]
    limit: int
    fetch: str
    """The dialect's placeholder for ``params["fetch"]``."""

    def select(self, table: str) -> str:
        """The page's statement, newest first: what :func:`~imagebridge.storage.rows.job_page`
        reads."""
        return (
            f"SELECT {', '.join(JOB_SUMMARY_COLUMNS)} FROM {table} "  # noqa: S608
            f"WHERE {self.where} ORDER BY created_at DESC, id DESC LIMIT {self.fetch}"
        )


def history_query(
    scope: str,
    *,
    visibility: JobVisibility | str,
    status: ImageJobStatus | str | None,
    favorite: bool | None,
    search: str | None,
    cursor: str | None,
    limit: int,
    placeholder: str,
    before_position: str,
    origin: JobOrigin | str | None = None,
) -> HistoryQuery:
    """Check a ``list`` call and build its conditions for one SQL dialect.

    ``placeholder`` formats a named parameter (``":{}"``, ``"%({})s"``); ``before_position``
    is the dialect's "row sorts after the cursor (``created``, ``after_id``)" condition.
    ``origin`` keeps the records one surface started (``job``, ``sync``, ``stream``,
    ``openai``); ``None`` lists them all, jobs and synchronous requests together.
    """
    check_scope(scope)
    shown = check_visibility(visibility)
    wanted = None if status is None else check_status(status)
    started_by = None if origin is None else check_origin(origin)
    if favorite is not None and not isinstance(favorite, bool):
        raise BridgeError.invalid_request("favorite must be a boolean", field="favorite")
    needle = normalize_search(search)
    position = None if cursor is None else decode_job_cursor(cursor)
    check_limit(limit)

    def condition(template: str, name: str) -> str:
        return template.format(placeholder.format(name))

    clauses = [condition("auth_scope = {}", "scope")]
    params: dict[str, Any] = {"scope": scope, "fetch": limit + 1}
    if shown is JobVisibility.ACTIVE:
        clauses.append("deleted_at IS NULL")
    elif shown is JobVisibility.HIDDEN:
        clauses.append("deleted_at IS NOT NULL")
    if wanted is not None:
        clauses.append(condition("status = {}", "status"))
        params["status"] = wanted.value
    if started_by is not None:
        clauses.append(condition("origin = {}", "origin"))
        params["origin"] = started_by.value
    if favorite is not None:
        clauses.append(condition("favorite = {}", "favorite"))
        params["favorite"] = favorite
    if needle is not None:
        clauses.append(condition("prompt_search LIKE {} ESCAPE '\\'", "pattern"))
        params["pattern"] = like_contains_pattern(needle)
    if position is not None:
        clauses.append(before_position)
        params["created"], params["after_id"] = position
    return HistoryQuery(
        where=" AND ".join(clauses),
        params=params,
        limit=limit,
        fetch=placeholder.format("fetch"),
    )


# -- updates and pruning ---------------------------------------------------------------------


def check_history_update(
    scope: str, *, favorite: bool | None, deleted: bool | None, now: int
) -> None:
    check_scope(scope)
    check_timestamp(now)
    if favorite is None and deleted is None:
        raise BridgeError.invalid_request("history update must change favorite or deleted state")
    for label, value in (("favorite", favorite), ("deleted", deleted)):
        if value is not None and not isinstance(value, bool):
            raise BridgeError.invalid_request(f"{label} must be a boolean", field=label)


def history_change(
    current: JobRecord, *, favorite: bool | None, deleted: bool | None, now: int
) -> tuple[bool, int | None, int]:
    """The new ``(favorite, deleted_at, updated_at)``; only finished jobs are (un)deleted."""
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
    return new_favorite, new_deleted, stamp


def prune_cutoff(
    *, now: int, retention_secs: int, max_retained: int, max_retained_bytes: int
) -> int:
    """Check ``prune``'s bounds; rows completed at or before the returned time expire."""
    check_timestamp(now)
    check_count(retention_secs, "retention_secs")
    check_count(max_retained, "max_retained")
    check_count(max_retained_bytes, "max_retained_bytes")
    return now - retention_secs
