"""Time-ordered artifact identifiers (UUIDv7, RFC 9562).

Python 3.11's :mod:`uuid` has no ``uuid7``. Artifact ids sort by creation time, and
retention ties are broken by id, so ids minted in the same millisecond must still
increase: the 12-bit ``rand_a`` field is used as a counter seeded at random.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

__all__ = ["canonical_uuid", "uuid7"]

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def uuid7(*, now_ms: int | None = None) -> uuid.UUID:
    """A new UUIDv7; monotonic within this process even inside one millisecond."""
    global _last_ms, _counter
    with _lock:
        millis = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        if millis > _last_ms:
            _last_ms = millis
            _counter = int.from_bytes(os.urandom(2), "big") & 0x7FF  # leave headroom
        else:
            _counter += 1
            if _counter > 0xFFF:  # counter exhausted: borrow the next millisecond
                _last_ms += 1
                _counter = 0
        millis = _last_ms
        counter = _counter
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand_b
    return uuid.UUID(int=value)


def canonical_uuid(value: str) -> str | None:
    """The lower-case hyphenated form of ``value``, or ``None`` if it is not exactly that.

    Only the canonical 36-character spelling is accepted (case-insensitively), so one
    artifact has one id and one marker file name.
    """
    if len(value) != 36:
        return None
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return None
    text = str(parsed)
    return text if text == value.lower() else None
