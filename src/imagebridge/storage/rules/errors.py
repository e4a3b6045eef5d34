"""The errors a database failure becomes, whatever the backend.

Each backend's ``errors.py`` tells which kind of failure a driver error is (SQLite's result
codes, PostgreSQL's SQLSTATEs); the code, message, retryability and details of each kind are
decided here, so a full disk, a lock wait or a closed store answers the same on both.
"""

from __future__ import annotations

from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import disk_fault

__all__ = [
    "MAX_REASON_CHARS",
    "database_busy",
    "database_closed",
    "database_fault",
    "inconsistent_write",
    "operation_failed",
]

MAX_REASON_CHARS = 200
"""How much of a driver's message ``details.reason`` keeps."""


def database_fault(label: str, fault: str, **details: Any) -> BridgeError:
    """A write the database's own disk refused (``no_space``, ``io_error``, ``read_only``).

    ``internal`` whatever the store, with ``details.reason`` and ``details.storage:
    "database"``, and recorded in the storage health: the transaction was rolled back, so
    nothing was half-written and the same call may be retried once the disk takes writes.
    """
    return disk_fault(
        ErrorCode.INTERNAL,
        f"{label} could not be written",
        fault,
        "database",
        retryable=True,
        **details,
    )


def database_busy(code: ErrorCode, label: str, details: dict[str, Any]) -> BridgeError:
    """Another writer held the lock longer than the busy timeout: safe to retry."""
    return BridgeError(code, f"{label} is busy", retryable=True, details=details)


def inconsistent_write(code: ErrorCode, label: str, details: dict[str, Any]) -> BridgeError:
    """A constraint refused the write (nothing was written)."""
    return BridgeError(code, f"{label} rejected an inconsistent write", details=details)


def operation_failed(code: ErrorCode, label: str, details: dict[str, Any]) -> BridgeError:
    """Any other failure of a store call."""
    return BridgeError(code, f"{label} operation failed", details=details)


def database_closed(code: ErrorCode, label: str) -> BridgeError:
    """A call on a store that was closed."""
    return BridgeError(code, f"{label} is closed")
