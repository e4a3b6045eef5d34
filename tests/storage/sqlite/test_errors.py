"""SQLite's failures as BridgeError: disk faults are named storage faults, the rest keep the
store's code."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.sqlite.errors import translate_error

from .conftest import open_demo


async def test_sqlite_errors_become_bridge_errors(demo_path: Path) -> None:
    db = await open_demo(demo_path)
    try:
        with pytest.raises(BridgeError) as caught:
            await db.run(lambda c: c.execute("SELECT * FROM no_such_table"))
        assert caught.value.code is ErrorCode.INTERNAL
        assert "no such table" in caught.value.details["reason"]
    finally:
        await db.close()


def test_sqlite_io_errors_are_io_error_and_read_only_is_read_only() -> None:
    for primary, extended, reason in [
        (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_IOERR | (4 << 8), "io_error"),  # IOERR_FSYNC
        (sqlite3.SQLITE_FULL, sqlite3.SQLITE_FULL, "no_space"),
        (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_READONLY, "read_only"),
    ]:
        exc = sqlite3.OperationalError("disk fault")
        exc.sqlite_errorcode = extended  # type: ignore[attr-defined]
        error = translate_error(exc, ErrorCode.SESSION, "session database")
        assert (error.code, error.details["reason"], error.retryable) == (
            ErrorCode.INTERNAL,
            reason,
            True,
        ), primary
    plain = sqlite3.OperationalError("no such table: x")
    assert "storage" not in translate_error(plain, ErrorCode.INTERNAL, "db").details
