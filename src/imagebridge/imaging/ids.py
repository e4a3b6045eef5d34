"""Time-ordered artifact identifiers (UUIDv7, RFC 9562).

Python 3.11's :mod:`uuid` has no ``uuid7``. Artifact ids sort by creation time, and
retention ties are broken by id, so ids minted in the same millisecond must still
increase: the 12-bit ``rand_a`` field is used as a counter seeded at random
(RFC 9562 §6.2, method 1).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable

__all__ = ["UUID7Generator", "canonical_uuid", "uuid7"]


class UUID7Generator:
    """A monotonic UUIDv7 source; one per process is enough (see :func:`uuid7`)."""

    def __init__(self, clock_ms: Callable[[], int] | None = None) -> None:
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0

    def __call__(self) -> uuid.UUID:
        with self._lock:
            millis = self._clock_ms()
            if millis > self._last_ms:
                self._last_ms = millis
                self._counter = int.from_bytes(os.urandom(2), "big") & 0x7FF  # headroom
            else:
                self._counter += 1
                if self._counter > 0xFFF:  # counter exhausted: borrow the next millisecond
                    self._last_ms += 1
                    self._counter = 0
            millis, counter = self._last_ms, self._counter
        rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
        value = (millis & ((1 << 48) - 1)) << 80
        value |= 0x7 << 76
        value |= counter << 64
        value |= 0b10 << 62
        value |= rand_b
        return uuid.UUID(int=value)


uuid7 = UUID7Generator()
"""A new UUIDv7; monotonic within this process even inside one millisecond."""


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
