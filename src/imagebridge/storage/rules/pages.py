"""Paging rules: how many rows a page may hold and where the next page starts."""

from __future__ import annotations

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.cursors import decode_preset_cursor
from imagebridge.storage.records import JobIdentity
from imagebridge.storage.rules.values import bounded_int

__all__ = [
    "DEFAULT_PAGE_LIMIT",
    "MAX_PAGE_LIMIT",
    "MAX_QUEUED_IDENTITIES",
    "check_limit",
    "check_preset_page",
    "check_queued_page",
]

DEFAULT_PAGE_LIMIT = 20
MAX_PAGE_LIMIT = 100

MAX_QUEUED_IDENTITIES = 10_000
"""Largest page ``queued_identities`` returns."""


def check_limit(limit: object, maximum: int = MAX_PAGE_LIMIT) -> int:
    checked = bounded_int(limit, 1, maximum)
    if checked is None:
        raise BridgeError.invalid_request(f"limit must be between 1 and {maximum}", field="limit")
    return checked


def check_preset_page(cursor: str | None, limit: int) -> str | None:
    """The checks ``list`` makes; returns the name the page starts after."""
    after = None if cursor is None else decode_preset_cursor(cursor)
    check_limit(limit)
    return after


def check_queued_page(limit: int, after: JobIdentity | None) -> None:
    """The page size and resume point of ``queued_identities``."""
    check_limit(limit, MAX_QUEUED_IDENTITIES)
    if after is not None and not isinstance(after, JobIdentity):
        raise BridgeError(ErrorCode.INTERNAL, "after must be a JobIdentity")
