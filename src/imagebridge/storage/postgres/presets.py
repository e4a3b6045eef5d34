"""Named request templates in PostgreSQL.

Same rules, errors and paging as :class:`~imagebridge.storage.sqlite.presets.SqlitePresetStore`:
an owner per preset (``""``: shared), names order bytewise (``COLLATE "C"``) whatever the
database collation.
"""

from __future__ import annotations

import asyncio
from typing import Self, Unpack

from imagebridge.storage.lifecycle import PRESET_STORE, StoreLifecycle
from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.inspection import inspect_schema
from imagebridge.storage.postgres.migrations import missing_objects, quote_schema, table_columns
from imagebridge.storage.postgres.url import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_SCHEMA,
    ConnectOptions,
)
from imagebridge.storage.records import JsonInput, PresetPage, PresetRecord, SchemaStatus
from imagebridge.storage.rows import PRESET_COLUMNS, preset_page, preset_record
from imagebridge.storage.rules.pages import DEFAULT_PAGE_LIMIT, check_preset_page
from imagebridge.storage.rules.presets import (
    MAX_PRESET_TEMPLATE_BYTES,
    SHARED_OWNER,
    check_preset_name,
    check_preset_owner,
    check_preset_write,
    prepare_template,
    preset_exists,
    preset_not_found,
    replaced_preset,
)
from imagebridge.storage.rules.schema import Migration, StoreSchema
from imagebridge.storage.rules.values import check_count

__all__ = ["PRESET_SCHEMA", "PostgresPresetStore", "inspect_preset_schema"]


async def _migrate_v1(conn: Connection, schema: str, recorded: bool) -> None:
    missing = await missing_objects(conn, schema, ("image_presets", "image_presets_updated_idx"))
    quoted = quote_schema(schema)
    if "image_presets" in missing:
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {quoted}.image_presets ("
            'name text COLLATE "C" PRIMARY KEY, '
            "description text, "
            "template_json text NOT NULL, "
            "created_at bigint NOT NULL, "
            "updated_at bigint NOT NULL)"
        )
    if "image_presets_updated_idx" in missing:
        await conn.execute(
            "CREATE INDEX IF NOT EXISTS image_presets_updated_idx "
            f"ON {quoted}.image_presets (updated_at DESC, name)"
        )


async def _migrate_v2(conn: Connection, schema: str, recorded: bool) -> None:
    """An owner per preset (``""``: shared), unique names per owner; the presets stored
    before keys had owners become the shared ones."""
    if "owner" in await table_columns(conn, schema, "image_presets"):
        return
    quoted = quote_schema(schema)
    await conn.execute(
        f"ALTER TABLE {quoted}.image_presets "
        "ADD COLUMN owner text COLLATE \"C\" NOT NULL DEFAULT ''"
    )
    await conn.execute(
        f"ALTER TABLE {quoted}.image_presets DROP CONSTRAINT IF EXISTS image_presets_pkey"
    )
    await conn.execute(
        f"ALTER TABLE {quoted}.image_presets ADD CONSTRAINT image_presets_pkey "
        "PRIMARY KEY (owner, name)"
    )
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS image_presets_name_idx ON {quoted}.image_presets (name)"
    )


PRESET_SCHEMA = StoreSchema(
    recorded_as="presets", migrations=(Migration(1, _migrate_v1), Migration(2, _migrate_v2))
)


def _visible(table: str, owner: str, shared: bool) -> tuple[str, tuple[str, ...]]:
    """The WHERE clause (and its parameters) of what ``owner`` reads: its own presets, and
    with ``shared`` the shared ones whose name it has not taken."""
    if shared and owner != SHARED_OWNER:
        return (
            f"(p.owner = %s OR (p.owner = '' AND NOT EXISTS (SELECT 1 FROM {table} AS own "  # noqa: S608
            "WHERE own.owner = %s AND own.name = p.name)))",
            (owner, owner),
        )
    return "p.owner = %s", (owner,)


class PostgresPresetStore(StoreLifecycle[PostgresDatabase]):
    """:class:`~imagebridge.storage.interfaces.PresetStore` over one PostgreSQL schema."""

    def __init__(self, database: PostgresDatabase, *, max_template_bytes: int) -> None:
        self._db = database
        self._max_template_bytes = max_template_bytes
        self._t = database.table("image_presets")

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        max_template_bytes: int = MAX_PRESET_TEMPLATE_BYTES,
        **options: Unpack[ConnectOptions],
    ) -> Self:
        check_count(max_template_bytes, "max_template_bytes")
        database = await PostgresDatabase.open_store(url, PRESET_STORE, PRESET_SCHEMA, **options)
        return cls(database, max_template_bytes=max_template_bytes)

    @property
    def schema(self) -> str:
        return self._db.schema

    async def _fetch(
        self, conn: Connection, name: str, owner: str, *, lock: bool, shared: bool = False
    ) -> PresetRecord | None:
        where, params = _visible(self._t, owner, shared)
        cursor = await conn.execute(
            f"SELECT {PRESET_COLUMNS} FROM {self._t} AS p WHERE p.name = %s AND {where} "  # noqa: S608
            "ORDER BY p.owner DESC LIMIT 1" + (" FOR UPDATE" if lock else ""),
            (name, *params),
        )
        row = await cursor.fetchone()
        return None if row is None else preset_record(row)

    async def create(
        self,
        name: str,
        *,
        description: str | None,
        template_json: JsonInput,
        now: int,
        owner: str = SHARED_OWNER,
    ) -> PresetRecord:
        """Store a new preset of ``owner`` (``created == updated``); a name the owner already
        has is a conflict."""
        check_preset_write(name, description, now)
        check_preset_owner(owner)
        template = await asyncio.to_thread(
            prepare_template, template_json, self._max_template_bytes
        )

        async def operation(conn: Connection) -> PresetRecord:
            cursor = await conn.execute(
                f"INSERT INTO {self._t} (owner, {PRESET_COLUMNS}) "  # noqa: S608
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (owner, name) DO NOTHING",
                (owner, name, description, template, now, now),
            )
            if cursor.rowcount != 1:
                raise preset_exists()
            return PresetRecord(name, description, template, now, now)

        return await self._db.run(operation)

    async def get(
        self, name: str, *, owner: str = SHARED_OWNER, shared: bool = False
    ) -> PresetRecord:
        """``owner``'s preset ``name`` (``shared``: else the shared one of that name)."""
        check_preset_name(name)
        check_preset_owner(owner)

        async def operation(conn: Connection) -> PresetRecord:
            record = await self._fetch(conn, name, owner, lock=False, shared=shared)
            if record is None:
                raise preset_not_found()
            return record

        return await self._db.run(operation)

    async def replace(
        self,
        name: str,
        *,
        description: str | None,
        template_json: JsonInput,
        now: int,
        owner: str = SHARED_OWNER,
    ) -> PresetRecord:
        """Full replace of ``owner``'s preset: keeps ``created``, sets ``updated``; ``None``
        clears the description."""
        check_preset_write(name, description, now)
        check_preset_owner(owner)
        template = await asyncio.to_thread(
            prepare_template, template_json, self._max_template_bytes
        )

        async def operation(conn: Connection) -> PresetRecord:
            existing = await self._fetch(conn, name, owner, lock=True)
            if existing is None:
                raise preset_not_found()
            record = replaced_preset(existing, description, template, now)
            await conn.execute(
                f"UPDATE {self._t} SET description = %s, template_json = %s, "  # noqa: S608
                "updated_at = %s WHERE owner = %s AND name = %s",
                (description, template, record.updated_at, owner, name),
            )
            return record

        return await self._db.run(operation)

    async def delete(self, name: str, *, owner: str = SHARED_OWNER) -> None:
        """Delete ``owner``'s preset ``name``."""
        check_preset_name(name)
        check_preset_owner(owner)

        async def operation(conn: Connection) -> None:
            cursor = await conn.execute(
                f"DELETE FROM {self._t} WHERE owner = %s AND name = %s",  # noqa: S608
                (owner, name),
            )
            if cursor.rowcount == 0:
                raise preset_not_found()

        await self._db.run(operation)

    async def list(
        self,
        *,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
        owner: str = SHARED_OWNER,
        shared: bool = False,
    ) -> PresetPage:
        """``owner``'s presets (``shared``: with the shared ones) by name after the exclusive
        ``cursor``; ``next_cursor`` only if more follow. Names are unique in a page."""
        after = check_preset_page(cursor, limit)
        check_preset_owner(owner)
        where, params = _visible(self._t, owner, shared)

        async def operation(conn: Connection) -> PresetPage:
            if after is None:
                result = await conn.execute(
                    f"SELECT {PRESET_COLUMNS} FROM {self._t} AS p WHERE {where} "  # noqa: S608
                    "ORDER BY p.name LIMIT %s",
                    (*params, limit + 1),
                )
            else:
                result = await conn.execute(
                    f"SELECT {PRESET_COLUMNS} FROM {self._t} AS p WHERE {where} "  # noqa: S608
                    "AND p.name > %s ORDER BY p.name LIMIT %s",
                    (*params, after, limit + 1),
                )
            return preset_page(await result.fetchall(), limit)

        return await self._db.run(operation)


async def inspect_preset_schema(
    url: str, *, schema: str = DEFAULT_SCHEMA, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
) -> SchemaStatus:
    """Read-only: the preset schema version in ``schema`` (nothing is created)."""
    return await inspect_schema(
        url,
        PRESET_SCHEMA,
        schema=schema,
        code=PRESET_STORE.code,
        label=PRESET_STORE.label,
        connect_timeout_s=connect_timeout_s,
    )
