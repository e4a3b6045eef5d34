"""API keys, their quota counters, usage and audit trail in PostgreSQL.

Same logic and SQL as the SQLite store (:class:`~imagebridge.storage.key_store.KeyStoreBase`);
here each statement list runs in one transaction on a pooled connection. Every instance
pointed at the database sees a revocation or a reservation at once: nothing is cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self, Unpack

from psycopg.rows import dict_row

from imagebridge.storage.key_store import KeyStoreBase, Statement
from imagebridge.storage.lifecycle import KEY_STORE, StoreLifecycle
from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.migrations import quote_schema, table_columns
from imagebridge.storage.postgres.queries import named_placeholders
from imagebridge.storage.postgres.url import (
    ConnectOptions,
)
from imagebridge.storage.rules.schema import Migration, StoreSchema

__all__ = ["KEY_SCHEMA", "PostgresKeyStore"]


async def _migrate_v1(conn: Connection, schema: str, recorded: bool) -> None:
    quoted = quote_schema(schema)
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {quoted}.api_keys ("
        'id text COLLATE "C" PRIMARY KEY, name text COLLATE "C" NOT NULL UNIQUE, '
        'prefix text NOT NULL, secret_hash text COLLATE "C" NOT NULL UNIQUE, '
        "created_at bigint NOT NULL, updated_at bigint NOT NULL, revoked_at bigint, "
        "expires_at bigint, images_per_day bigint, images_per_week bigint, "
        "images_per_month bigint, max_concurrent bigint, providers text, "
        "day_start bigint NOT NULL DEFAULT 0, day_used bigint NOT NULL DEFAULT 0, "
        "week_start bigint NOT NULL DEFAULT 0, week_used bigint NOT NULL DEFAULT 0, "
        "month_start bigint NOT NULL DEFAULT 0, month_used bigint NOT NULL DEFAULT 0)"
    )
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {quoted}.api_key_usage ("
        'key_id text COLLATE "C" NOT NULL, day text COLLATE "C" NOT NULL, '
        'provider text COLLATE "C" NOT NULL, account text COLLATE "C" NOT NULL, '
        "requested bigint NOT NULL, delivered bigint NOT NULL, failed bigint NOT NULL, "
        "unknown bigint NOT NULL, total_tokens bigint NOT NULL DEFAULT 0, "
        "PRIMARY KEY (key_id, day, provider, account))"
    )
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS api_key_usage_day ON {quoted}.api_key_usage (day)"
    )
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {quoted}.api_key_audit ("
        "seq bigserial PRIMARY KEY, at bigint NOT NULL, actor text NOT NULL, "
        'action text NOT NULL, key_id text COLLATE "C" NOT NULL, key_name text NOT NULL, '
        "details text NOT NULL)"
    )


async def _migrate_v2(conn: Connection, schema: str, recorded: bool) -> None:
    """``max_concurrent`` held in the database: the key's count of requests in flight on
    every instance, and a lease row per slot (so a killed instance's slots come back)."""
    quoted = quote_schema(schema)
    await conn.execute(
        f"ALTER TABLE {quoted}.api_keys ADD COLUMN IF NOT EXISTS in_flight bigint NOT NULL "
        "DEFAULT 0"
    )
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {quoted}.api_key_slots ("
        'id text COLLATE "C" PRIMARY KEY, key_id text COLLATE "C" NOT NULL, '
        "holder text NOT NULL, acquired_at bigint NOT NULL, expires_at bigint NOT NULL)"
    )
    await conn.execute(
        "CREATE INDEX IF NOT EXISTS api_key_slots_key "
        f"ON {quoted}.api_key_slots (key_id, expires_at)"
    )


async def _migrate_v3(conn: Connection, schema: str, recorded: bool) -> None:
    """Usage says which images were kept for a caller that had gone (``kept``) and which
    answered a joined retry without a new generation (``replayed``)."""
    quoted = quote_schema(schema)
    present = await table_columns(conn, schema, "api_key_usage")
    for column in ("kept", "replayed"):
        if column not in present:
            await conn.execute(
                f"ALTER TABLE {quoted}.api_key_usage ADD COLUMN {column} bigint NOT NULL DEFAULT 0"
            )


KEY_SCHEMA = StoreSchema(
    recorded_as="keys",
    migrations=(
        Migration(1, _migrate_v1),
        Migration(2, _migrate_v2),
        Migration(3, _migrate_v3),
    ),
)


class PostgresKeyStore(KeyStoreBase, StoreLifecycle[PostgresDatabase]):
    """:class:`~imagebridge.storage.interfaces.KeyStore` in one PostgreSQL schema."""

    def __init__(self, database: PostgresDatabase) -> None:
        self._db = database
        self._keys = database.table("api_keys")
        self._usage = database.table("api_key_usage")
        self._audit = database.table("api_key_audit")
        self._slots = database.table("api_key_slots")

    @classmethod
    async def open(
        cls,
        url: str,
        **options: Unpack[ConnectOptions],
    ) -> Self:
        database = await PostgresDatabase.open_store(url, KEY_STORE, KEY_SCHEMA, **options)
        return cls(database)

    @property
    def schema(self) -> str:
        return self._db.schema

    async def _script(self, statements: Sequence[Statement]) -> list[dict[str, Any]]:
        async def operation(conn: Connection) -> list[dict[str, Any]]:
            async with conn.cursor(row_factory=dict_row) as cursor:
                await cursor.execute(named_placeholders(statements[0][0]), dict(statements[0][1]))
                first = await cursor.fetchall() if cursor.description is not None else []
            for sql, params in statements[1:] if first else ():
                await conn.execute(named_placeholders(sql), dict(params))
            return first

        return await self._db.run(operation)
