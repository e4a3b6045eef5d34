"""Persistent session bindings in PostgreSQL.

Same rules as :class:`~imagebridge.storage.sqlite.sessions.SqliteSessionStore`: one store
instance per provider namespace, and every failure, from a bad identifier to a lost server, is a
``session`` error.
"""

from __future__ import annotations

from typing import Self, Unpack

from imagebridge.storage.lifecycle import SESSION_STORE, StoreLifecycle
from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.inspection import inspect_schema
from imagebridge.storage.postgres.migrations import missing_objects, quote_schema
from imagebridge.storage.postgres.url import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_SCHEMA,
    ConnectOptions,
)
from imagebridge.storage.records import SchemaStatus
from imagebridge.storage.rules.schema import Migration, StoreSchema
from imagebridge.storage.rules.sessions import (
    check_binding,
    check_session_key,
    check_session_provider,
)

__all__ = ["SESSION_SCHEMA", "PostgresSessionStore", "inspect_session_schema"]


async def _migrate_v1(conn: Connection, schema: str, recorded: bool) -> None:
    if await missing_objects(conn, schema, ("session_bindings",)):
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {quote_schema(schema)}.session_bindings ("
            'provider text COLLATE "C" NOT NULL, '
            'session_key text COLLATE "C" NOT NULL, '
            "thread_id text NOT NULL, "
            "created_at bigint NOT NULL, "
            "updated_at bigint NOT NULL, "
            "PRIMARY KEY (provider, session_key))"
        )


SESSION_SCHEMA = StoreSchema(recorded_as="sessions", migrations=(Migration(1, _migrate_v1),))


class PostgresSessionStore(StoreLifecycle[PostgresDatabase]):
    """:class:`~imagebridge.storage.interfaces.SessionStore` for one provider's namespace."""

    def __init__(self, database: PostgresDatabase, provider: str) -> None:
        self._db = database
        self._provider = provider
        self._t = database.table("session_bindings")

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        provider: str,
        **options: Unpack[ConnectOptions],
    ) -> Self:
        check_session_provider(provider)
        database = await PostgresDatabase.open_store(url, SESSION_STORE, SESSION_SCHEMA, **options)
        return cls(database, provider)

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def schema(self) -> str:
        return self._db.schema

    async def get(self, key: str) -> str | None:
        """The thread bound to ``key``, or ``None``."""
        check_session_key(key)

        async def operation(conn: Connection) -> str | None:
            cursor = await conn.execute(
                f"SELECT thread_id FROM {self._t} "  # noqa: S608
                "WHERE provider = %s AND session_key = %s",
                (self._provider, key),
            )
            row = await cursor.fetchone()
            return None if row is None else str(row[0])

        return await self._db.run(operation)

    async def put(self, key: str, thread_id: str, *, now: int | None = None) -> None:
        """Bind ``key`` to ``thread_id``, replacing any earlier binding."""
        stamp = check_binding(key, thread_id, now)

        async def operation(conn: Connection) -> None:
            await conn.execute(
                f"INSERT INTO {self._t} AS b "  # noqa: S608
                "(provider, session_key, thread_id, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (provider, session_key) DO UPDATE SET "
                "thread_id = excluded.thread_id, "
                "updated_at = GREATEST(excluded.updated_at, b.updated_at)",
                (self._provider, key, thread_id, stamp, stamp),
            )

        await self._db.run(operation)

    async def delete(self, key: str) -> bool:
        """Remove the binding; return whether one existed."""
        check_session_key(key)

        async def operation(conn: Connection) -> bool:
            cursor = await conn.execute(
                f"DELETE FROM {self._t} WHERE provider = %s AND session_key = %s",  # noqa: S608
                (self._provider, key),
            )
            return cursor.rowcount > 0

        return await self._db.run(operation)


async def inspect_session_schema(
    url: str, *, schema: str = DEFAULT_SCHEMA, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
) -> SchemaStatus:
    """Read-only: the session schema version in ``schema`` (nothing is created)."""
    return await inspect_schema(
        url,
        SESSION_SCHEMA,
        schema=schema,
        code=SESSION_STORE.code,
        label=SESSION_STORE.label,
        connect_timeout_s=connect_timeout_s,
    )
