"""How the PostgreSQL stores run statements: rows by column name, and advisory-lock keys."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from psycopg.rows import dict_row

from imagebridge.storage.postgres.connection import Connection

__all__ = ["advisory_key", "fetch_row", "fetch_rows", "fetch_value", "named_placeholders"]

_NAMED = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


def named_placeholders(sql: str) -> str:
    """SQL written with ``:name`` placeholders (shared with SQLite) in psycopg's
    ``%(name)s`` form."""
    return _NAMED.sub(r"%(\1)s", sql)


async def fetch_rows(conn: Connection, sql: str, params: Any = None) -> list[dict[str, Any]]:
    """Every row of ``sql``, each addressed by column name."""
    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql, params)
        return await cursor.fetchall()


async def fetch_row(conn: Connection, sql: str, params: Any = None) -> dict[str, Any] | None:
    """The first row of ``sql`` addressed by column name, or ``None``."""
    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql, params)
        return await cursor.fetchone()


async def fetch_value(conn: Connection, sql: str, params: Any = None) -> Any:
    """The first column of the first row of ``sql``, or ``None`` when there is no row."""
    cursor = await conn.execute(sql, params)
    row = await cursor.fetchone()
    return None if row is None else row[0]


def advisory_key(schema: str, purpose: str) -> int:
    """A stable signed 64-bit advisory-lock key for ``purpose`` within ``schema``.

    Stores take these transaction-scoped locks around work that must be serialized across
    every instance (migrating, admission, pruning).
    """
    digest = hashlib.sha256(f"imagebridge:{schema}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
