"""A SQLite store's schema version, read without creating or changing anything.

With no WAL file the main file holds everything, and an ``immutable`` read-only open reads it
without creating ``-wal``/``-shm`` side files; a live WAL is read through a normal read-only
open. A missing file is a store not initialized yet.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

from imagebridge.contract.errors import ErrorCode
from imagebridge.storage.records import SchemaStatus
from imagebridge.storage.rules.schema import StoreSchema
from imagebridge.storage.sqlite.connection import check_database_path
from imagebridge.storage.sqlite.errors import translate_error
from imagebridge.storage.sqlite.migrations import Step

__all__ = ["inspect_schema"]


def _inspect_sync(
    path: Path, store_schema: StoreSchema[Step], code: ErrorCode, label: str
) -> SchemaStatus:
    current = store_schema.current_version
    if not check_database_path(path, code, label):
        return SchemaStatus(initialized=False, version=None, current_version=current)
    wal_exists = os.path.lexists(f"{path}-wal")
    uri = path.absolute().as_uri() + ("?mode=ro" if wal_exists else "?mode=ro&immutable=1")
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise translate_error(exc, code, label) from None
    try:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
            (store_schema.recorded_as,),
        ).fetchone()
        if found is None:
            return SchemaStatus(initialized=False, version=None, current_version=current)
        row = conn.execute(
            f"SELECT MAX(version) FROM {store_schema.recorded_as}"  # noqa: S608
        ).fetchone()
    except sqlite3.Error as exc:
        raise translate_error(exc, code, label) from None
    finally:
        conn.close()
    version = None if row is None or row[0] is None else int(row[0])
    return SchemaStatus(initialized=version is not None, version=version, current_version=current)


async def inspect_schema(
    path: str | os.PathLike[str], store_schema: StoreSchema[Step], *, code: ErrorCode, label: str
) -> SchemaStatus:
    """Report a database's schema version without creating or changing anything."""
    return await asyncio.to_thread(_inspect_sync, Path(path), store_schema, code, label)
