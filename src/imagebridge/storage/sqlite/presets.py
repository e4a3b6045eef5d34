"""Named request templates in SQLite.

Presets are global (not scoped by bearer). The store checks names, descriptions and the
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
    check_preset_name,
    check_preset_write,
    prepare_template,
    preset_exists,
    preset_not_found,
    replaced_preset,
)
from imagebridge.storage.rules.values import check_count
from imagebridge.storage.sqlite.database import (
    Migration,
    Schema,
    SqliteDatabase,
    immediate,
    inspect_schema,
)

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


PRESET_SCHEMA = Schema(
    migrations_table="preset_schema_migrations",
    migrations=(Migration(1, _migrate_v1),),
)


def _fetch(conn: sqlite3.Connection, name: str) -> PresetRecord | None:
    row = conn.execute(
        f"SELECT {PRESET_COLUMNS} FROM image_presets WHERE name = ?",  # noqa: S608
        (name,),
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
            schema=PRESET_SCHEMA,
            code=PRESET_STORE.code,
            label=PRESET_STORE.label,
            busy_timeout_ms=busy_timeout_ms,
        )
        return cls(database, max_template_bytes=max_template_bytes)

    @property
    def path(self) -> Path:
        return self._db.path

    async def create(
        self, name: str, *, description: str | None, template_json: JsonInput, now: int
    ) -> PresetRecord:
        """Store a new preset (``created == updated``); an existing name is a conflict."""
        check_preset_write(name, description, now)
        limit = self._max_template_bytes

        def operation(conn: sqlite3.Connection) -> PresetRecord:
            template = prepare_template(template_json, limit)
            with immediate(conn):
                if _fetch(conn, name) is not None:
                    raise preset_exists()
                conn.execute(
                    f"INSERT INTO image_presets ({PRESET_COLUMNS}) VALUES (?, ?, ?, ?, ?)",  # noqa: S608
                    (name, description, template, now, now),
                )
                crash_point("preset.inserted")  # before COMMIT: SQLite's journal undoes it
            return PresetRecord(name, description, template, now, now)

        return await self._db.run(operation)

    async def get(self, name: str) -> PresetRecord:
        check_preset_name(name)

        def operation(conn: sqlite3.Connection) -> PresetRecord:
            record = _fetch(conn, name)
            if record is None:
                raise preset_not_found()
            return record

        return await self._db.run(operation)

    async def replace(
        self, name: str, *, description: str | None, template_json: JsonInput, now: int
    ) -> PresetRecord:
        """Full replace: keeps ``created``, sets ``updated``; ``None`` clears the description."""
        check_preset_write(name, description, now)
        limit = self._max_template_bytes

        def operation(conn: sqlite3.Connection) -> PresetRecord:
            template = prepare_template(template_json, limit)
            with immediate(conn):
                existing = _fetch(conn, name)
                if existing is None:
                    raise preset_not_found()
                record = replaced_preset(existing, description, template, now)
                conn.execute(
                    "UPDATE image_presets SET description = ?, template_json = ?, updated_at = ? "
                    "WHERE name = ?",
                    (description, template, record.updated_at, name),
                )
            return record

        return await self._db.run(operation)

    async def delete(self, name: str) -> None:
        check_preset_name(name)

        def operation(conn: sqlite3.Connection) -> None:
            if conn.execute("DELETE FROM image_presets WHERE name = ?", (name,)).rowcount == 0:
                raise preset_not_found()

        await self._db.run(operation)

    async def list(
        self, *, cursor: str | None = None, limit: int = DEFAULT_PAGE_LIMIT
    ) -> PresetPage:
        """Presets by name after the exclusive ``cursor``; ``next_cursor`` only if more follow."""
        after = check_preset_page(cursor, limit)

        def operation(conn: sqlite3.Connection) -> PresetPage:
            if after is None:
                rows = conn.execute(
                    f"SELECT {PRESET_COLUMNS} FROM image_presets ORDER BY name LIMIT ?",  # noqa: S608
                    (limit + 1,),
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {PRESET_COLUMNS} FROM image_presets WHERE name > ? "  # noqa: S608
                    "ORDER BY name LIMIT ?",
                    (after, limit + 1),
                ).fetchall()
            return preset_page(rows, limit)

        return await self._db.run(operation)


async def inspect_preset_schema(path: str | os.PathLike[str]) -> SchemaStatus:
    """Read-only: the preset schema version of ``path`` (a missing file is not created)."""
    return await inspect_schema(
        path, PRESET_SCHEMA, code=PRESET_STORE.code, label=PRESET_STORE.label
    )
