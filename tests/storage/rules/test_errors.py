"""The same kind of database failure answers the same on SQLite and PostgreSQL: one code, one
message, one retry rule (no server needed: the drivers' own exception types are built here)."""

from __future__ import annotations

import sqlite3

import pytest
from psycopg import errors as pg_errors

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.postgres.errors import translate_error as translate_postgres
from imagebridge.storage.sqlite.errors import translate_error as translate_sqlite

LABEL = "session database"


def sqlite_error(kind: type[sqlite3.Error], code: int, message: str) -> sqlite3.Error:
    exc = kind(message)
    exc.sqlite_errorcode = code  # type: ignore[attr-defined]
    return exc


def shape(error: BridgeError) -> tuple[object, ...]:
    """What a caller can tell two errors apart by (not the driver's own wording)."""
    return (
        error.code,
        error.message,
        error.retryable,
        error.http_status,
        error.details.get("storage"),
        error.details["reason"] if error.details.get("storage") == "database" else None,
    )


@pytest.mark.parametrize(
    ("sqlite", "postgres", "message"),
    [
        (
            sqlite_error(sqlite3.OperationalError, sqlite3.SQLITE_FULL, "database or disk is full"),
            pg_errors.DiskFull("could not extend file: No space left on device"),
            "session database could not be written: there is no space left on the device",
        ),
        (
            sqlite_error(sqlite3.OperationalError, sqlite3.SQLITE_IOERR, "disk I/O error"),
            pg_errors.IoError("could not read block 0"),
            None,
        ),
        (
            sqlite_error(sqlite3.OperationalError, sqlite3.SQLITE_BUSY, "database is locked"),
            pg_errors.LockNotAvailable("canceling statement due to lock timeout"),
            "session database is busy",
        ),
        (
            sqlite_error(sqlite3.IntegrityError, sqlite3.SQLITE_CONSTRAINT, "CHECK failed"),
            pg_errors.CheckViolation("new row violates check constraint"),
            "session database rejected an inconsistent write",
        ),
        (
            sqlite_error(sqlite3.OperationalError, sqlite3.SQLITE_ERROR, "no such table: x"),
            pg_errors.UndefinedTable('relation "x" does not exist'),
            "session database operation failed",
        ),
    ],
    ids=["disk_full", "io_error", "busy", "constraint", "other"],
)
def test_both_backends_give_one_failure_the_same_error(
    sqlite: Exception, postgres: Exception, message: str | None
) -> None:
    from_sqlite = translate_sqlite(sqlite, ErrorCode.SESSION, LABEL)
    from_postgres = translate_postgres(postgres, ErrorCode.SESSION, LABEL)
    assert shape(from_sqlite) == shape(from_postgres)
    if message is not None:
        assert from_sqlite.message == message
