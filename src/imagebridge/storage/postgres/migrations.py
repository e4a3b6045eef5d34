"""Bringing a PostgreSQL schema to a store's tables: idempotent, self-repairing steps.

All tables live in one schema (default ``imagebridge``). ``schema_migrations(component,
version, applied_at)`` records each store's steps under its
:attr:`~imagebridge.storage.rules.schema.StoreSchema.recorded_as` name; migrating takes a
transaction-scoped advisory lock, so any number of bridges may start at once against a fresh
database. Steps are idempotent and self-repairing: missing indexes are re-created on the next
open; DDL runs only when something is missing, so a bridge whose tables were created by an
administrator needs no ``CREATE`` privilege. A schema a newer bridge wrote is refused, never
changed.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from imagebridge.contract.errors import ErrorCode
from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.queries import advisory_key
from imagebridge.storage.rules.schema import StoreSchema, check_not_newer

__all__ = [
    "Step",
    "migrate",
    "missing_objects",
    "quote_schema",
    "recorded_versions",
    "table_columns",
]

Step = Callable[[Connection, str, bool], Awaitable[None]]
"""How a PostgreSQL migration applies: ``apply(conn, schema, recorded)`` inside the migration's
transaction. ``schema`` is the (validated, unquoted) schema name: qualify tables with
:func:`quote_schema` (see :class:`~imagebridge.storage.rules.schema.Migration`)."""

_MIGRATION_LOCK_TIMEOUT_MS = 60_000


def quote_schema(schema: str) -> str:
    """A schema name checked by :func:`~.url.check_schema_name`, quoted for SQL text."""
    return f'"{schema}"'


async def _schema_exists(conn: Connection, schema: str) -> bool:
    cursor = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
    return await cursor.fetchone() is not None


async def missing_objects(conn: Connection, schema: str, names: tuple[str, ...]) -> set[str]:
    """Which of the tables or indexes ``names`` do not exist in ``schema``."""
    cursor = await conn.execute(
        "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = ANY(%s)",
        (schema, list(names)),
    )
    found = {str(row[0]) for row in await cursor.fetchall()}
    return set(names) - found


async def table_columns(conn: Connection, schema: str, table: str) -> set[str]:
    cursor = await conn.execute(
        "SELECT a.attname FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped",
        (schema, table),
    )
    return {str(row[0]) for row in await cursor.fetchall()}


async def recorded_versions(conn: Connection, schema: str, component: str) -> set[int]:
    """The steps recorded for ``component`` (none when nothing was ever migrated)."""
    if "schema_migrations" in await missing_objects(conn, schema, ("schema_migrations",)):
        return set()
    cursor = await conn.execute(
        f"SELECT version FROM {quote_schema(schema)}.schema_migrations "  # noqa: S608
        "WHERE component = %s",
        (component,),
    )
    return {int(row[0]) for row in await cursor.fetchall()}


async def migrate(
    conn: Connection,
    schema: str,
    store_schema: StoreSchema[Step],
    code: ErrorCode,
    label: str,
) -> None:
    """Apply every step of ``store_schema`` in ``schema``, in one transaction."""
    quoted = quote_schema(schema)
    component = store_schema.recorded_as
    async with conn.transaction():
        await conn.execute(f"SET LOCAL lock_timeout = {_MIGRATION_LOCK_TIMEOUT_MS}")
        # Serializes every bridge migrating this schema, whatever the component.
        await conn.execute(
            "SELECT pg_advisory_xact_lock(%s)", (advisory_key(schema, "migrations"),)
        )
        if not await _schema_exists(conn, schema):
            await conn.execute(f"CREATE SCHEMA {quoted}")
        if await missing_objects(conn, schema, ("schema_migrations",)):
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {quoted}.schema_migrations ("
                'component text COLLATE "C" NOT NULL, '
                "version integer NOT NULL, "
                "applied_at bigint NOT NULL, "
                "PRIMARY KEY (component, version))"
            )
        recorded = await recorded_versions(conn, schema, component)
        check_not_newer(recorded, store_schema.current_version, code, label)
        applied_at = int(time.time())
        for migration in store_schema.migrations:
            await migration.apply(conn, schema, migration.version in recorded)
            if migration.version not in recorded:
                await conn.execute(
                    f"INSERT INTO {quoted}.schema_migrations "  # noqa: S608
                    "(component, version, applied_at) VALUES (%s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (component, migration.version, applied_at),
                )
