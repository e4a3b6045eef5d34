"""What the SDK reads from an answer's headers: the request id and ``Retry-After``.

Both are the server's hints, so both are read defensively: an oversized or malformed value
is ``None``, never an exception. :mod:`._exceptions` attaches them to the error it builds;
:mod:`._retry` decides what a ``Retry-After`` is worth.
"""

from __future__ import annotations

import email.utils
import math
import time

import httpx

from imagebridge.client._constants import REQUEST_ID_HEADER

__all__ = ["header_request_id", "parse_retry_after"]

_MAX_RETRY_AFTER_CHARS = 64
_MAX_REQUEST_ID_CHARS = 256


def header_request_id(headers: httpx.Headers | None) -> str | None:
    """The bridge's ``x-request-id``, unless absent or implausibly long."""
    if headers is None:
        return None
    value = headers.get(REQUEST_ID_HEADER)
    return value if value and len(value) <= _MAX_REQUEST_ID_CHARS else None


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date; ``None`` if unusable."""
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > _MAX_RETRY_AFTER_CHARS:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if math.isfinite(seconds):
        return max(0.0, seconds)
    if not math.isnan(seconds):
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    current = time.time() if now is None else now
    try:
        return max(0.0, when.timestamp() - current)
    except (OverflowError, OSError, ValueError):
        return None
