"""A key's quota arithmetic: readings per window, a reservation, a refusal, usage shares.

Pure functions over a :class:`~imagebridge.storage.records.KeyRecord` and the calendar
periods of one instant (:class:`~imagebridge.storage.rules.keys.Windows`); the statements
that move the counters are the key store's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.keys import KEY_WINDOWS, BridgeKeyQuota, KeyWindow
from imagebridge.storage.records import KeyRecord
from imagebridge.storage.rules.keys import Windows

__all__ = ["Reservation", "account_shares", "quota_readings", "quota_refusal"]


@dataclass(frozen=True, slots=True)
class Reservation:
    """Images held on a key's windows for one request, in the periods they were taken in."""

    key: KeyRecord
    n: int
    windows: Windows


def quota_readings(record: KeyRecord, windows: Windows) -> dict[KeyWindow, BridgeKeyQuota]:
    """``window → (limit, remaining, reset)`` for each window the key has a limit on."""
    out: dict[KeyWindow, BridgeKeyQuota] = {}
    for window in KEY_WINDOWS:
        limit = record.limits.window_limit(window)
        if limit is None:
            continue
        used = record.used_in(window, windows.start(window))
        out[window] = BridgeKeyQuota(
            limit=limit, remaining=max(0, limit - used), reset_at=windows.end(window)
        )
    return out


def quota_refusal(record: KeyRecord, n: int, windows: Windows) -> BridgeError:
    """429 for the windows without room; ``Retry-After`` at the latest of their resets."""
    full = []
    for window in KEY_WINDOWS:
        limit = record.limits.window_limit(window)
        if limit is not None and record.used_in(window, windows.start(window)) + n > limit:
            full.append(window)
    if not full:  # the counters moved since: a concurrent request took the room
        full = [w for w in KEY_WINDOWS if record.limits.window_limit(w) is not None][:1] or ["day"]
    reset = max(windows.end(w) for w in full)
    return BridgeError(
        ErrorCode.RATE_LIMITED,
        f"API key image quota exceeded ({', '.join(full)})",
        retryable=True,
        details={
            "reason": "key_quota",
            "windows": full,
            "reset_at": reset,
            "retry_after_ms": max(1, reset - windows.now) * 1000,
        },
    )


def account_shares(
    n: int, delivered: int, account: str | None, served_by: Mapping[str, int] | None
) -> list[tuple[str, int, int]]:
    """``(account, requested, delivered)`` rows of one outcome of ``n`` images.

    Each account that served images is charged what it produced (in the order given) and
    delivered up to that; images no account is known for (a fan-out chunk that failed,
    or no pool) stay on the row of ``account`` (``""`` when unknown)."""
    rows: list[tuple[str, int, int]] = []
    left_n, left_delivered = n, delivered
    for name, count in (served_by or {}).items():
        requested = max(0, min(count, left_n))
        if requested == 0:
            continue
        got = min(requested, left_delivered)
        rows.append((name, requested, got))
        left_n -= requested
        left_delivered -= got
    if left_n > 0 or not rows:
        rows.append((account or "", left_n, left_delivered))
    return rows
