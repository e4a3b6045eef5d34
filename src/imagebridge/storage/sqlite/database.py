"""SQLite plumbing shared by the stores: safe opening, pragmas, migrations, a worker thread.

Threading model: every store owns one :class:`SqliteDatabase`, which owns one connection and
one dedicated single-thread executor. The connection is created, used and closed on that
thread only, so calls are naturally serialized and the event loop never touches SQLite.
Several stores (or processes) may share one file: each has its own connection, writers take
``BEGIN IMMEDIATE`` and wait up to ``busy_timeout`` for each other.

Migrations are idempotent and self-repairing: on every open each step re-checks the real
schema (missing columns and indexes are re-created) and data back-fills run again whenever a
step's marker row is missing. A database written by a newer schema is refused, never changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Self, TypeVar

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import (
    IO_ERROR,
    NO_SPACE,
    READ_ONLY,
    STORAGE_HEALTH,
    disk_fault,
    disk_fault_reason,
)
from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS
from imagebridge.storage.records import SchemaStatus
from imagebridge.storage.rules.schema import (
    check_migration_numbers,
    check_not_newer,
    is_plain_identifier,
)

__all__ = [
    "Migration",
    "Schema",
    "SqliteDatabase",
    "check_database_path",
    "ensure_column",
    "immediate",
    "inspect_schema",
    "run_for_ids",
    "table_columns",
]

T = TypeVar("T")

_MAX_REASON_CHARS = 200


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step. ``apply(conn, recorded)`` must be idempotent.

    ``recorded`` tells whether the step's marker row exists: structural checks run every
    time, while costly data back-fills may run only when the marker is missing.
    """

    version: int
    apply: Callable[[sqlite3.Connection, bool], None]


@dataclass(frozen=True, slots=True)
class Schema:
    """A store's migrations and the table that records them (one table per store)."""

    migrations_table: str
    migrations: tuple[Migration, ...]

    def __post_init__(self) -> None:
        if not is_plain_identifier(self.migrations_table):
            raise ValueError("migrations table must be a plain SQL identifier")
        check_migration_numbers([m.version for m in self.migrations])

    @property
    def current_version(self) -> int:
        return len(self.migrations)


# -- errors ------------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:_MAX_REASON_CHARS]


def _is_busy(exc: Exception) -> bool:
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


def _translate(exc: Exception, code: ErrorCode, label: str) -> BridgeError:
    """A clean BridgeError for a SQLite (or other unexpected) failure in a store call.

    A disk fault (full, I/O error, read-only) is ``internal`` with ``details.reason`` and
    ``details.storage: "database"`` whatever the store: SQLite rolled the transaction
    back, so nothing was half-written and the same call may be retried once space returns.
    """
    if isinstance(exc, BridgeError):
        return exc
    fault = _storage_fault(exc)
    if fault is not None:
        return disk_fault(
            ErrorCode.INTERNAL, f"{label} could not be written", fault, "database", retryable=True
        )
    if _is_busy(exc):
        return BridgeError(
            code,
            f"{label} is busy",
            retryable=True,
            details={"reason": _reason(exc)},
        )
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        message = f"{label} is unreadable or not a SQLite database"
        if isinstance(exc, sqlite3.IntegrityError):
            message = f"{label} rejected an inconsistent write"
        return BridgeError(code, message, details={"reason": _reason(exc)})
    return BridgeError(code, f"{label} operation failed", details={"reason": _reason(exc)})


# -- path handling ---------------------------------------------------------------------------


def check_database_path(path: Path, code: ErrorCode, label: str) -> bool:
    """Refuse anything but a regular file; return whether the file exists."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise BridgeError(
            code, f"{label} path cannot be inspected", details={"reason": _reason(exc)}
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


def _prepare_file(path: Path, code: ErrorCode, label: str) -> None:
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
            code, f"{label} file cannot be created", details={"reason": _reason(exc)}
        ) from None
    check_database_path(path, code, label)


# -- transactions and schema helpers ---------------------------------------------------------


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``: the write lock is taken up front, so a transaction
    never fails half-way on a lock upgrade; any exception rolls everything back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def table_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    if not is_plain_identifier(table):  # pragma: no cover - internal misuse
        raise ValueError("table must be a plain SQL identifier")
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


def ensure_column(conn: sqlite3.Connection, table: str, column: str, declaration: str) -> bool:
    """Add ``column`` when missing; return whether it was added."""
    if column in table_columns(conn, table):
        return False
    if not is_plain_identifier(column):  # pragma: no cover - internal misuse
        raise ValueError("column must be a plain SQL identifier")
    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    return True


def _recorded_versions(conn: sqlite3.Connection, table: str) -> set[int]:
    return {int(row[0]) for row in conn.execute(f"SELECT version FROM {table}")}  # noqa: S608


def _migrate(conn: sqlite3.Connection, schema: Schema, code: ErrorCode, label: str) -> None:
    table = schema.migrations_table
    with immediate(conn):
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} ("
            "version INTEGER PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)"
        )
        recorded = _recorded_versions(conn, table)
        check_not_newer(recorded, schema.current_version, code, label)
        applied_at = int(time.time())
        for migration in schema.migrations:
            migration.apply(conn, migration.version in recorded)
            conn.execute(
                f"INSERT OR IGNORE INTO {table} (version, applied_at) VALUES (?, ?)",  # noqa: S608
                (migration.version, applied_at),
            )


_WAL_RETRY_MAX_DELAY_S = 0.05


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
            if not _is_busy(exc) or remaining <= 0:
                raise
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, _WAL_RETRY_MAX_DELAY_S)


def _connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    conn = sqlite3.connect(
        str(path),
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,  # explicit transactions only (see ``immediate``)
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


# -- the database handle ---------------------------------------------------------------------


class SqliteDatabase:
    """One connection on one dedicated worker thread; :meth:`run` is the only way in."""

    def __init__(
        self,
        path: Path,
        executor: ThreadPoolExecutor,
        conn: sqlite3.Connection,
        code: ErrorCode,
        label: str,
    ) -> None:
        self._path = path
        self._executor = executor
        self._conn = conn
        self._code = code
        self._label = label
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        schema: Schema,
        code: ErrorCode,
        label: str,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> Self:
        """Open (creating when absent) and migrate ``path``; errors carry ``code``."""
        if not isinstance(busy_timeout_ms, int) or not 0 <= busy_timeout_ms <= 3_600_000:
            raise BridgeError(code, "busy_timeout_ms must be between 0 and 3600000")
        db_path = Path(path)
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="imagebridge-sqlite")

        def open_on_worker() -> sqlite3.Connection:
            _prepare_file(db_path, code, label)
            try:
                conn = _connect(db_path, busy_timeout_ms)
            except Exception as exc:
                raise _translate(exc, code, label) from None
            try:
                # The path may have been swapped between the check and the open.
                check_database_path(db_path, code, label)
                _migrate(conn, schema, code, label)
            except Exception as exc:
                conn.close()
                raise _translate(exc, code, label) from None
            return conn

        loop = asyncio.get_running_loop()
        try:
            conn = await loop.run_in_executor(executor, open_on_worker)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(db_path, executor, conn, code, label)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def closed(self) -> bool:
        return self._closed

    def _call(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        changes = self._conn.total_changes
        try:
            result = operation(self._conn)
        except Exception as exc:
            raise _translate(exc, self._code, self._label) from None
        if self._conn.total_changes != changes:  # a write went through: the disk takes them
            STORAGE_HEALTH.succeeded("database")
        return result

    async def run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation(conn)`` on the worker thread.

        If the awaiting task is cancelled the operation still runs to its end (or never
        starts), so a transaction is never left half-done.
        """
        if self._closed:
            raise BridgeError(self._code, f"{self._label} is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._call, operation)
        except RuntimeError as exc:
            if "shutdown" in str(exc):
                raise BridgeError(self._code, f"{self._label} is closed") from None
            raise BridgeError(self._code, f"{self._label} operation failed") from None

    async def close(self) -> None:
        """Finish queued calls, close the connection and let the worker thread exit."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._conn.close)
        finally:
            self._executor.shutdown(wait=False)


# -- read-only inspection --------------------------------------------------------------------


def _inspect_sync(path: Path, schema: Schema, code: ErrorCode, label: str) -> SchemaStatus:
    current = schema.current_version
    if not check_database_path(path, code, label):
        return SchemaStatus(initialized=False, version=None, current_version=current)
    # With no WAL file the main file holds everything: ``immutable`` then reads it without
    # creating -wal/-shm side files. A live WAL is read through a normal read-only open.
    wal_exists = os.path.lexists(f"{path}-wal")
    uri = path.absolute().as_uri() + ("?mode=ro" if wal_exists else "?mode=ro&immutable=1")
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise _translate(exc, code, label) from None
    try:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
            (schema.migrations_table,),
        ).fetchone()
        if found is None:
            return SchemaStatus(initialized=False, version=None, current_version=current)
        row = conn.execute(
            f"SELECT MAX(version) FROM {schema.migrations_table}"  # noqa: S608
        ).fetchone()
    except sqlite3.Error as exc:
        raise _translate(exc, code, label) from None
    finally:
        conn.close()
    version = None if row is None or row[0] is None else int(row[0])
    return SchemaStatus(initialized=version is not None, version=version, current_version=current)


async def inspect_schema(
    path: str | os.PathLike[str], schema: Schema, *, code: ErrorCode, label: str
) -> SchemaStatus:
    """Report a database's schema version without creating or changing anything."""
    return await asyncio.to_thread(_inspect_sync, Path(path), schema, code, label)


def run_for_ids(
    conn: sqlite3.Connection,
    sql: str,
    ids: Sequence[str],
    params: Mapping[str, object] | None = None,
    *,
    chunk: int = 500,
) -> int:
    """Run ``sql`` (holding ``{ids}``) over bounded chunks of ``ids``; return rows changed.

    Ids are bound as named parameters, so ``sql`` may use other ``:name`` parameters too.
    """
    changed = 0
    for start in range(0, len(ids), chunk):
        named = {f"id{i}": value for i, value in enumerate(ids[start : start + chunk])}
        placeholders = ", ".join(f":{name}" for name in named)
        cursor = conn.execute(sql.format(ids=placeholders), {**(params or {}), **named})
        changed += max(cursor.rowcount, 0)
    return changed
