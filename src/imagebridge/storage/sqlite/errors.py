"""SQLite's failures as :class:`BridgeError`: which kind each one is.

A disk fault (full, I/O error, read-only), a lock held past the busy timeout, a refused
constraint or an unreadable file; the error each kind becomes is
:mod:`imagebridge.storage.rules.errors`'s, the same as PostgreSQL's.
"""

from __future__ import annotations

import sqlite3

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import IO_ERROR, NO_SPACE, READ_ONLY, disk_fault_reason
from imagebridge.storage.rules.errors import (
    MAX_REASON_CHARS,
    database_busy,
    database_fault,
    inconsistent_write,
    operation_failed,
)

__all__ = ["error_reason", "is_busy", "translate_error"]


def error_reason(exc: BaseException) -> str:
    """``details.reason`` of a failure: its message, bounded."""
    text = str(exc) or type(exc).__name__
    return text[:MAX_REASON_CHARS]


def is_busy(exc: Exception) -> bool:
    """Another connection holds the lock (``SQLITE_BUSY`` / ``SQLITE_LOCKED``)."""
    return isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", None) in (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    )


_FAULT_BY_PRIMARY_CODE = {
    sqlite3.SQLITE_FULL: NO_SPACE,
    sqlite3.SQLITE_IOERR: IO_ERROR,
    sqlite3.SQLITE_READONLY: READ_ONLY,
}


def _storage_fault(exc: Exception) -> str | None:
    """``no_space`` / ``io_error`` / ``read_only`` for SQLite's (or the OS's) disk faults."""
    primary = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.Error) and isinstance(primary, int):
        return _FAULT_BY_PRIMARY_CODE.get(primary & 0xFF)
    return disk_fault_reason(exc)


def translate_error(exc: Exception, code: ErrorCode, label: str) -> BridgeError:
    """A clean BridgeError for a SQLite (or other unexpected) failure in a store call.

    A disk fault (full, I/O error, read-only) is ``internal`` with ``details.reason`` and
    ``details.storage: "database"`` whatever the store: SQLite rolled the transaction
    back, so nothing was half-written and the same call may be retried once space returns.
    """
    if isinstance(exc, BridgeError):
        return exc
    fault = _storage_fault(exc)
    if fault is not None:
        return database_fault(label, fault)
    details = {"reason": error_reason(exc)}
    if is_busy(exc):
        return database_busy(code, label, details)
    if isinstance(exc, sqlite3.IntegrityError):
        return inconsistent_write(code, label, details)
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return BridgeError(code, f"{label} is unreadable or not a SQLite database", details=details)
    return operation_failed(code, label, details)
