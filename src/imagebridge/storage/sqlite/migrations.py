"""Bringing a SQLite file to a store's schema: idempotent, self-repairing steps.

On every open each step re-checks the real schema (missing columns and indexes are
re-created), and data back-fills run again whenever a step's marker row is missing. Each
store records its steps in a table of its own (:attr:`StoreSchema.recorded_as`), so several
stores share one file independently. A file a newer bridge migrated is refused, never changed.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from imagebridge.contract.errors import ErrorCode
from imagebridge.storage.rules.schema import StoreSchema, check_not_newer, is_plain_identifier
from imagebridge.storage.sqlite.queries import immediate

__all__ = ["Step", "ensure_column", "migrate", "table_columns"]

Step = Callable[[sqlite3.Connection, bool], None]
"""How a SQLite migration applies: ``apply(conn, recorded)``, inside the migration's
transaction (see :class:`~imagebridge.storage.rules.schema.Migration`)."""


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


def migrate(
    conn: sqlite3.Connection, store_schema: StoreSchema[Step], code: ErrorCode, label: str
) -> None:
    """Apply every step of ``store_schema`` in one ``BEGIN IMMEDIATE`` transaction."""
    table = store_schema.recorded_as
    with immediate(conn):
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} ("
            "version INTEGER PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)"
        )
        recorded = _recorded_versions(conn, table)
        check_not_newer(recorded, store_schema.current_version, code, label)
        applied_at = int(time.time())
        for migration in store_schema.migrations:
            migration.apply(conn, migration.version in recorded)
            conn.execute(
                f"INSERT OR IGNORE INTO {table} (version, applied_at) VALUES (?, ?)",  # noqa: S608
                (migration.version, applied_at),
            )
