"""API keys, their quota counters, usage and audit trail in SQLite (the jobs database file).

The logic and SQL are :class:`~imagebridge.storage.key_store.KeyStoreBase`'s; this module adds
the tables and runs each statement list in one ``BEGIN IMMEDIATE`` transaction on the store's
worker thread.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from typing import Any, Self

from imagebridge.storage.key_store import KeyStoreBase, Statement
from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS, KEY_STORE, StoreLifecycle
from imagebridge.storage.rules.schema import Migration, StoreSchema
from imagebridge.storage.sqlite.database import SqliteDatabase
from imagebridge.storage.sqlite.migrations import ensure_column
from imagebridge.storage.sqlite.queries import immediate

__all__ = ["KEY_SCHEMA", "SqliteKeyStore"]


def _migrate_v1(conn: sqlite3.Connection, recorded: bool) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS api_keys ("
        "id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, "
        "secret_hash TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL, "
        "updated_at INTEGER NOT NULL, revoked_at INTEGER, expires_at INTEGER, "
        "images_per_day INTEGER, images_per_week INTEGER, images_per_month INTEGER, "
        "max_concurrent INTEGER, providers TEXT, "
        "day_start INTEGER NOT NULL DEFAULT 0, day_used INTEGER NOT NULL DEFAULT 0, "
        "week_start INTEGER NOT NULL DEFAULT 0, week_used INTEGER NOT NULL DEFAULT 0, "
        "month_start INTEGER NOT NULL DEFAULT 0, month_used INTEGER NOT NULL DEFAULT 0)"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS api_key_usage ("
        "key_id TEXT NOT NULL, day TEXT NOT NULL, provider TEXT NOT NULL, "
        "account TEXT NOT NULL, requested INTEGER NOT NULL, delivered INTEGER NOT NULL, "
        "failed INTEGER NOT NULL, unknown INTEGER NOT NULL, "
        "total_tokens INTEGER NOT NULL DEFAULT 0, "
        "PRIMARY KEY (key_id, day, provider, account))"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS api_key_usage_day ON api_key_usage (day)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS api_key_audit ("
        "seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, actor TEXT NOT NULL, "
        "action TEXT NOT NULL, key_id TEXT NOT NULL, key_name TEXT NOT NULL, "
        "details TEXT NOT NULL)"
    )


def _migrate_v2(conn: sqlite3.Connection, recorded: bool) -> None:
    """``max_concurrent`` held in the database: the key's count of requests in flight on
    every instance, and a lease row per slot (so a killed instance's slots come back)."""
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(api_keys)")}
    if "in_flight" not in columns:
        conn.execute("ALTER TABLE api_keys ADD COLUMN in_flight INTEGER NOT NULL DEFAULT 0")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS api_key_slots ("
        "id TEXT PRIMARY KEY, key_id TEXT NOT NULL, holder TEXT NOT NULL, "
        "acquired_at INTEGER NOT NULL, expires_at INTEGER NOT NULL)"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS api_key_slots_key ON api_key_slots (key_id, expires_at)"
    )


def _migrate_v3(conn: sqlite3.Connection, recorded: bool) -> None:
    """Usage says which images were kept for a caller that had gone (``kept``) and which
    answered a joined retry without a new generation (``replayed``)."""
    for column in ("kept", "replayed"):
        ensure_column(conn, "api_key_usage", column, "INTEGER NOT NULL DEFAULT 0")


KEY_SCHEMA = StoreSchema(
    recorded_as="key_schema_migrations",
    migrations=(Migration(1, _migrate_v1), Migration(2, _migrate_v2), Migration(3, _migrate_v3)),
)


def _rows(conn: sqlite3.Connection, sql: str, params: Any) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, dict(params))
    rows = cursor.fetchall()
    if cursor.description is None:
        return []
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in rows]


class SqliteKeyStore(KeyStoreBase, StoreLifecycle[SqliteDatabase]):
    """:class:`~imagebridge.storage.interfaces.KeyStore` in one SQLite file."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    ) -> Self:
        database = await SqliteDatabase.open(
            path,
            store_schema=KEY_SCHEMA,
            code=KEY_STORE.code,
            label=KEY_STORE.label,
            busy_timeout_ms=busy_timeout_ms,
        )
        return cls(database)

    async def _script(self, statements: Sequence[Statement]) -> list[dict[str, Any]]:
        def operation(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            if len(statements) == 1:  # one statement is atomic alone; reads take no lock
                return _rows(conn, *statements[0])
            with immediate(conn):
                first = _rows(conn, *statements[0])
                for sql, params in statements[1:] if first else ():
                    conn.execute(sql, dict(params))
            return first

        return await self._db.run(operation)
