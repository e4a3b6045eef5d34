"""The SQLite database handle every store owns: one connection on one worker thread.

Threading model: every store owns one :class:`SqliteDatabase`, which owns one connection and
one dedicated single-thread executor. The connection is created, used and closed on that
thread only, so calls are naturally serialized and the event loop never touches SQLite.
Several stores (or processes) may share one file: each has its own connection, writers take
``BEGIN IMMEDIATE`` (:func:`~.queries.immediate`) and wait up to ``busy_timeout`` for each
other. Opening checks the path (:mod:`.connection`) and migrates (:mod:`.migrations`); every
failure is translated by :mod:`.errors`.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Self, TypeVar

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import STORAGE_HEALTH
from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS
from imagebridge.storage.rules.errors import database_closed, operation_failed
from imagebridge.storage.rules.schema import StoreSchema
from imagebridge.storage.sqlite.connection import check_database_path, connect, prepare_file
from imagebridge.storage.sqlite.errors import translate_error
from imagebridge.storage.sqlite.migrations import Step, migrate

__all__ = ["SqliteDatabase"]

T = TypeVar("T")


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
        store_schema: StoreSchema[Step],
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
            prepare_file(db_path, code, label)
            try:
                conn = connect(db_path, busy_timeout_ms)
            except Exception as exc:
                raise translate_error(exc, code, label) from None
            try:
                # The path may have been swapped between the check and the open.
                check_database_path(db_path, code, label)
                migrate(conn, store_schema, code, label)
            except Exception as exc:
                conn.close()
                raise translate_error(exc, code, label) from None
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
            raise translate_error(exc, self._code, self._label) from None
        if self._conn.total_changes != changes:  # a write went through: the disk takes them
            STORAGE_HEALTH.succeeded("database")
        return result

    async def run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation(conn)`` on the worker thread.

        If the awaiting task is cancelled the operation still runs to its end (or never
        starts), so a transaction is never left half-done.
        """
        if self._closed:
            raise database_closed(self._code, self._label)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._call, operation)
        except RuntimeError as exc:
            if "shutdown" in str(exc):
                raise database_closed(self._code, self._label) from None
            raise operation_failed(self._code, self._label, {}) from None

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
