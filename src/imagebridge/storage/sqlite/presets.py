"""Named request templates in SQLite.

Each preset has an ``owner``: ``""`` for the shared ones (the admin's; everyone's without
API keys), ``key:<id>`` for a key's own (docs/keys.md). A name is unique per owner; a
reader may ask for its own presets with the shared ones under them (``shared=True``: its
own shadow a shared one of the same name). The store checks names, descriptions and the
template's storable shape; validating a template as a request is the caller's job, because it
needs the contract models and the configured limits. The table can live in the jobs database
file: it keeps its own migrations table, so both stores open the same file independently.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Self

from imagebridge.engine.crash_points import crash_point
from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS, PRESET_STORE, StoreLifecycle
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
from imagebridge.storage.sqlite.database import SqliteDatabase
from imagebridge.storage.sqlite.inspection import inspect_schema
from imagebridge.storage.sqlite.queries import immediate

__all__ = ["PRESET_SCHEMA", "SqlitePresetStore", "inspect_preset_schema"]


def _migrate_v1(conn: sqlite3.Connection, recorded: bool) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS image_presets ("
        "name TEXT PRIMARY KEY NOT NULL, "
        "description TEXT, "
        "template_json TEXT NOT NULL, "
        "created_at INTEGER NOT NULL, "
        "updated_at INTEGER NOT NULL)"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS image_presets_updated_idx "
        "ON image_presets (updated_at DESC, name)"
    )


def _migrate_v2(conn: sqlite3.Connection, recorded: bool) -> None:
    """An owner per preset (``""``: shared), unique names per owner.

    SQLite cannot change a primary key in place, so the table is rebuilt once; the presets
    stored before keys had owners become the shared ones."""
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(image_presets)")}
    if "owner" in columns:
        return
    conn.execute(
        "CREATE TABLE image_presets_owned ("
        "owner TEXT NOT NULL DEFAULT '', "
        "name TEXT NOT NULL, "
        "description TEXT, "
        "template_json TEXT NOT NULL, "
        "created_at INTEGER NOT NULL, "
        "updated_at INTEGER NOT NULL, "
        "PRIMARY KEY (owner, name))"
    )
    conn.execute(
        f"INSERT INTO image_presets_owned (owner, {PRESET_COLUMNS}) "  # noqa: S608
        f"SELECT '', {PRESET_COLUMNS} FROM image_presets"
    )
    conn.execute("DROP TABLE image_presets")
    conn.execute("ALTER TABLE image_presets_owned RENAME TO image_presets")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS image_presets_updated_idx "
        "ON image_presets (updated_at DESC, name)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS image_presets_name_idx ON image_presets (name)")


PRESET_SCHEMA = StoreSchema(
    recorded_as="preset_schema_migrations",
    migrations=(Migration(1, _migrate_v1), Migration(2, _migrate_v2)),
)

# The presets ``?`` (an owner) sees with the shared ones: its own, and the shared ones
# whose name it has not taken.
_VISIBLE = (
    "(owner = ? OR (owner = '' AND NOT EXISTS (SELECT 1 FROM image_presets AS own "
    "WHERE own.owner = ? AND own.name = image_presets.name)))"
)


def _visible(owner: str, shared: bool) -> tuple[str, tuple[str, ...]]:
    """The WHERE clause (and its parameters) of what ``owner`` reads."""
    if shared and owner != SHARED_OWNER:
        return _VISIBLE, (owner, owner)
    return "owner = ?", (owner,)


def _fetch(
    conn: sqlite3.Connection, name: str, owner: str, *, shared: bool = False
) -> PresetRecord | None:
    where, params = _visible(owner, shared)
    row = conn.execute(
        f"SELECT {PRESET_COLUMNS} FROM image_presets WHERE name = ? AND {where} "  # noqa: S608
        "ORDER BY owner DESC LIMIT 1",
        (name, *params),
    ).fetchone()
    return None if row is None else preset_record(row)


class SqlitePresetStore(StoreLifecycle[SqliteDatabase]):
    """:class:`~imagebridge.storage.interfaces.PresetStore` over one SQLite file."""

    def __init__(self, database: SqliteDatabase, *, max_template_bytes: int) -> None:
        self._db = database
        self._max_template_bytes = max_template_bytes

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        max_template_bytes: int = MAX_PRESET_TEMPLATE_BYTES,
    ) -> Self:
        check_count(max_template_bytes, "max_template_bytes")
        database = await SqliteDatabase.open(
            path,
            store_schema=PRESET_SCHEMA,
            code=PRESET_STORE.code,
            label=PRESET_STORE.label,
            busy_timeout_ms=busy_timeout_ms,
        )
        return cls(database, max_template_bytes=max_template_bytes)

    @property
    def path(self) -> Path:
        return self._db.path

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
        limit = self._max_template_bytes

        def operation(conn: sqlite3.Connection) -> PresetRecord:
            template = prepare_template(template_json, limit)
            with immediate(conn):
                if _fetch(conn, name, owner) is not None:
                    raise preset_exists()
                conn.execute(
                    f"INSERT INTO image_presets (owner, {PRESET_COLUMNS}) "  # noqa: S608
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (owner, name, description, template, now, now),
                )
                crash_point("preset.inserted")  # before COMMIT: SQLite's journal undoes it
            return PresetRecord(name, description, template, now, now)

        return await self._db.run(operation)

    async def get(
        self, name: str, *, owner: str = SHARED_OWNER, shared: bool = False
    ) -> PresetRecord:
        """``owner``'s preset ``name`` (``shared``: else the shared one of that name)."""
        check_preset_name(name)
        check_preset_owner(owner)

        def operation(conn: sqlite3.Connection) -> PresetRecord:
            record = _fetch(conn, name, owner, shared=shared)
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
        limit = self._max_template_bytes

        def operation(conn: sqlite3.Connection) -> PresetRecord:
            template = prepare_template(template_json, limit)
            with immediate(conn):
                existing = _fetch(conn, name, owner)
                if existing is None:
                    raise preset_not_found()
                record = replaced_preset(existing, description, template, now)
                conn.execute(
                    "UPDATE image_presets SET description = ?, template_json = ?, updated_at = ? "
                    "WHERE owner = ? AND name = ?",
                    (description, template, record.updated_at, owner, name),
                )
            return record

        return await self._db.run(operation)

    async def delete(self, name: str, *, owner: str = SHARED_OWNER) -> None:
        """Delete ``owner``'s preset ``name``."""
        check_preset_name(name)
        check_preset_owner(owner)

        def operation(conn: sqlite3.Connection) -> None:
            sql = "DELETE FROM image_presets WHERE owner = ? AND name = ?"
            if conn.execute(sql, (owner, name)).rowcount == 0:
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
        where, params = _visible(owner, shared)

        def operation(conn: sqlite3.Connection) -> PresetPage:
            if after is None:
                rows = conn.execute(
                    f"SELECT {PRESET_COLUMNS} FROM image_presets WHERE {where} "  # noqa: S608
                    "ORDER BY name LIMIT ?",
                    (*params, limit + 1),
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {PRESET_COLUMNS} FROM image_presets WHERE {where} "  # noqa: S608
                    "AND name > ? ORDER BY name LIMIT ?",
                    (*params, after, limit + 1),
                ).fetchall()
            return preset_page(rows, limit)

        return await self._db.run(operation)


async def inspect_preset_schema(path: str | os.PathLike[str]) -> SchemaStatus:
    """Read-only: the preset schema version of ``path`` (a missing file is not created)."""
    return await inspect_schema(
        path, PRESET_SCHEMA, code=PRESET_STORE.code, label=PRESET_STORE.label
    )
