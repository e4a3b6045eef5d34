"""The rules of a job history query, checked before the store.

The HTTP layer turns the query string into typed values; this module checks those values
and resolves the deprecated ``include_deleted`` alias, so every surface (HTTP, CLI, MCP)
refuses the same query with the same message.
"""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError
from imagebridge.storage.cursors import decode_job_cursor
from imagebridge.storage.records import JobVisibility
from imagebridge.storage.rules.history import normalize_search
from imagebridge.storage.rules.pages import DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT

__all__ = ["INVALID_QUERY", "JobQuery", "job_query"]

INVALID_QUERY = "job query parameters are invalid"


@dataclass(frozen=True, slots=True)
class JobQuery:
    """A checked history query, ready for :meth:`JobStore.list`."""

    limit: int = DEFAULT_PAGE_LIMIT
    cursor: str | None = None
    status: ImageJobStatus | None = None
    visibility: JobVisibility = JobVisibility.ACTIVE
    favorite: bool | None = None
    search: str | None = None


def _invalid(field: str) -> BridgeError:
    return BridgeError.invalid_request(INVALID_QUERY, field=field)


def job_query(
    *,
    limit: int | None = None,
    cursor: str | None = None,
    status: ImageJobStatus | str | None = None,
    visibility: JobVisibility | str | None = None,
    favorite: bool | None = None,
    search: str | None = None,
    include_deleted: bool | None = None,
) -> JobQuery:
    """Check every value; ``None`` means the key was absent from the query."""
    if limit is None:
        limit = DEFAULT_PAGE_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise _invalid("limit")
    if not 1 <= limit <= MAX_PAGE_LIMIT:
        raise BridgeError.invalid_request(
            f"job page limit must be between 1 and {MAX_PAGE_LIMIT}", field="limit"
        )
    parsed_status: ImageJobStatus | None = None
    if status is not None:
        try:
            parsed_status = ImageJobStatus(status)
        except ValueError:
            raise _invalid("status") from None
    for label, flag in (("favorite", favorite), ("include_deleted", include_deleted)):
        if flag is not None and not isinstance(flag, bool):
            raise _invalid(label)
    shown = JobVisibility.ACTIVE
    if visibility is not None:
        try:
            shown = JobVisibility(visibility)
        except ValueError:
            raise _invalid("visibility") from None
        # Only ``include_deleted=true`` conflicts; ``false`` defers to the visibility given.
        if include_deleted:
            raise BridgeError.invalid_request(
                "include_deleted cannot be combined with visibility", field="include_deleted"
            )
    elif include_deleted:
        shown = JobVisibility.ALL
    if search is not None and not isinstance(search, str):
        raise _invalid("search")
    normalize_search(search)  # raises the search rule's own message
    needle = None if search is None or not search.strip() else search.strip()
    if cursor is not None:
        decode_job_cursor(cursor)  # "job cursor is malformed"
    return JobQuery(
        limit=limit,
        cursor=cursor,
        status=parsed_status,
        visibility=shown,
        favorite=favorite,
        search=needle,
    )
