"""Persistent session bindings in SQLite.

A binding maps a caller's session key to a provider thread id. One store instance serves one
provider name (its namespace); several providers may share the file. Every failure, from a bad
identifier to an unreadable file, is a ``session`` error.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Self

from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS, SESSION_STORE, StoreLifecycle
from imagebridge.storage.records import SchemaStatus
from imagebridge.storage.rules.schema import Migration, StoreSchema
from imagebridge.storage.rules.sessions import (
    check_binding,
    check_session_key,
    check_session_provider,
)
from imagebridge.storage.sqlite.database import SqliteDatabase
from imagebridge.storage.sqlite.inspection import inspect_schema

__all__ = ["SESSION_SCHEMA", "SqliteSessionStore", "inspect_session_schema"]


def _migrate_v1(conn: sqlite3.Connection, recorded: bool) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS session_bindings ("
        "provider TEXT NOT NULL, "
        "session_key TEXT NOT NULL, "
        "thread_id TEXT NOT NULL, "
        "created_at INTEGER NOT NULL, "
        "updated_at INTEGER NOT NULL, "
        "PRIMARY KEY (provider, session_key))"
    )


SESSION_SCHEMA = StoreSchema(
    recorded_as="schema_migrations", migrations=(Migration(1, _migrate_v1),)
)


class SqliteSessionStore(StoreLifecycle[SqliteDatabase]):
    """:class:`~imagebridge.storage.interfaces.SessionStore` for one provider's namespace."""

    def __init__(self, database: SqliteDatabase, provider: str) -> None:
        self._db = database
        self._provider = provider

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        provider: str,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> Self:
        check_session_provider(provider)
        database = await SqliteDatabase.open(
            path,
            store_schema=SESSION_SCHEMA,
            code=SESSION_STORE.code,
            label=SESSION_STORE.label,
            busy_timeout_ms=busy_timeout_ms,
        )
        return cls(database, provider)

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def path(self) -> Path:
        return self._db.path

    async def get(self, key: str) -> str | None:
        """The thread bound to ``key``, or ``None``."""
        check_session_key(key)
        provider = self._provider

        def operation(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT thread_id FROM session_bindings WHERE provider = ? AND session_key = ?",
                (provider, key),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._db.run(operation)

    async def put(self, key: str, thread_id: str, *, now: int | None = None) -> None:
        """Bind ``key`` to ``thread_id``, replacing any earlier binding."""
        stamp = check_binding(key, thread_id, now)
        provider = self._provider

        def operation(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO session_bindings "
                "(provider, session_key, thread_id, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (provider, session_key) DO UPDATE SET "
                "thread_id = excluded.thread_id, "
                "updated_at = MAX(excluded.updated_at, session_bindings.updated_at)",
                (provider, key, thread_id, stamp, stamp),
            )

        await self._db.run(operation)

    async def delete(self, key: str) -> bool:
        """Remove the binding; return whether one existed."""
        check_session_key(key)
        provider = self._provider

        def operation(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "DELETE FROM session_bindings WHERE provider = ? AND session_key = ?",
                (provider, key),
            )
            return cursor.rowcount > 0

        return await self._db.run(operation)


async def inspect_session_schema(path: str | os.PathLike[str]) -> SchemaStatus:
    """Read-only: the session schema version of ``path`` (a missing file is not created)."""
    return await inspect_schema(
        path, SESSION_SCHEMA, code=SESSION_STORE.code, label=SESSION_STORE.label
    )
