"""Reaching a SQLite database: a checked path, a private file, a connection in WAL mode.

The path must be a regular file (never a symbolic link, a directory or a device); a missing
file is created ``0600`` in a ``0700`` directory. Every connection waits ``busy_timeout`` for
other writers, runs in WAL mode with ``synchronous = FULL`` and foreign keys on, and is used
from one thread only (the store's worker, :class:`~.database.SqliteDatabase`).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.sqlite.errors import error_reason, is_busy

__all__ = ["check_database_path", "connect", "prepare_file"]

_WAL_RETRY_MAX_DELAY_S = 0.05


def check_database_path(path: Path, code: ErrorCode, label: str) -> bool:
    """Refuse anything but a regular file; return whether the file exists."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise BridgeError(
            code, f"{label} path cannot be inspected", details={"reason": error_reason(exc)}
        ) from None
    if stat.S_ISLNK(info.st_mode):
        raise BridgeError(
            code, f"{label} path must not be a symbolic link", details={"reason": "symlink"}
        )
    if not stat.S_ISREG(info.st_mode):
        raise BridgeError(
            code, f"{label} path must be a regular file", details={"reason": "not_regular_file"}
        )
    return True


def prepare_file(path: Path, code: ErrorCode, label: str) -> None:
    """Create the parent directory and a private (0600) empty file when absent."""
    if check_database_path(path, code, label):
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
        os.close(fd)
    except FileExistsError:
        pass  # created concurrently: checked again below
    except OSError as exc:
        raise BridgeError(
            code, f"{label} file cannot be created", details={"reason": error_reason(exc)}
        ) from None
    check_database_path(path, code, label)


def _enable_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """Switch to WAL, waiting up to ``busy_timeout_ms`` for other connections.

    While another connection holds a write lock on a database still in rollback-journal
    mode (a new file that another process or store is opening at the same moment), SQLite
    answers this pragma with SQLITE_BUSY at once, without calling the busy handler; so it
    is retried here, with short sleeps (this runs on the store's worker thread).
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            remaining = deadline - time.monotonic()
            if not is_busy(exc) or remaining <= 0:
                raise
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, _WAL_RETRY_MAX_DELAY_S)


def connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection to ``path`` with the stores' pragmas (call it on the worker thread)."""
    conn = sqlite3.connect(
        str(path),
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,  # explicit transactions only (see ``queries.immediate``)
        check_same_thread=True,
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        _enable_wal(conn, busy_timeout_ms)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA trusted_schema = OFF")
    except BaseException:
        conn.close()
        raise
    return conn
