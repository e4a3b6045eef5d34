"""psycopg's failures as :class:`BridgeError`: which kind each one is, by SQLSTATE.

The server's own disk faults, lock waits and conflicts, a server that is away, a refused
constraint; the error each kind becomes is :mod:`imagebridge.storage.rules.errors`'s, the
same as SQLite's. Only a failure's primary message is ever kept: a ``DETAIL`` line can quote
row values (prompts, requests), and a connection error can quote the URL.
"""

from __future__ import annotations

from typing import Any

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import IO_ERROR, NO_SPACE
from imagebridge.storage.rules.errors import (
    MAX_REASON_CHARS,
    database_busy,
    database_fault,
    inconsistent_write,
    operation_failed,
)

__all__ = ["connection_lost", "database_unavailable", "translate_error"]

_BUSY_STATES = (
    pg_errors.LockNotAvailable,
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    pg_errors.QueryCanceled,
)

_FAULT_BY_SQLSTATE = {
    "53100": NO_SPACE,  # disk_full: the server could not extend a file or write its WAL
    "58030": IO_ERROR,  # io_error: the server's own read or write failed
}


def _reason(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    # Only the primary message: a DETAIL line can quote row values (prompts, requests).
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    text = primary or (str(exc).splitlines()[0] if str(exc) else "") or type(exc).__name__
    return text[:MAX_REASON_CHARS]


def database_unavailable(code: ErrorCode, label: str, details: dict[str, Any]) -> BridgeError:
    """The database is away (restarting, unreachable): a retry after it returns is safe."""
    return BridgeError(
        code, f"{label} is unavailable", retryable=True, details={**details, "storage": "database"}
    )


def translate_error(exc: BaseException, code: ErrorCode, label: str) -> BridgeError:
    """A clean :class:`BridgeError` for a psycopg (or other unexpected) failure.

    The server's own disk faults (SQLSTATE ``53100`` disk full, ``58030`` I/O error) are
    storage faults like SQLite's: ``internal``, retryable, ``details.reason`` and
    ``details.storage: "database"``, recorded in the storage health. A database that is
    away (or short of other resources, class ``53``) is retryable with ``details.storage``.
    """
    if isinstance(exc, BridgeError):
        return exc
    sqlstate = getattr(exc, "sqlstate", None)
    fault = _FAULT_BY_SQLSTATE.get(sqlstate) if isinstance(sqlstate, str) else None
    if fault is not None:
        return database_fault(label, fault, sqlstate=sqlstate)
    details: dict[str, Any] = {"reason": _reason(exc)}
    if isinstance(sqlstate, str):
        details["sqlstate"] = sqlstate
    if isinstance(exc, _BUSY_STATES):
        return database_busy(code, label, details)
    if isinstance(
        exc, psycopg_pool.PoolTimeout | psycopg.OperationalError | psycopg.InterfaceError
    ):
        return database_unavailable(code, label, details)
    if isinstance(exc, psycopg.IntegrityError):
        return inconsistent_write(code, label, details)
    return operation_failed(code, label, details)


def connection_lost(exc: BaseException) -> bool:
    """The connection went away (no answer, or a connection or shutdown SQLSTATE)."""
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    sqlstate = getattr(exc, "sqlstate", None)
    return sqlstate is None or sqlstate[:2] in ("08", "57")
