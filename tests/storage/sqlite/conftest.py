"""The demo schema the SQLite plumbing tests open (two steps, recorded in their own table)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from imagebridge.contract.errors import ErrorCode
from imagebridge.storage.rules.schema import Migration, StoreSchema
from imagebridge.storage.sqlite.database import SqliteDatabase

CALLS: list[tuple[int, bool]] = []


def create_items(conn: sqlite3.Connection, recorded: bool) -> None:
    CALLS.append((1, recorded))
    conn.execute("CREATE TABLE IF NOT EXISTS items (value TEXT NOT NULL)")


def index_items(conn: sqlite3.Connection, recorded: bool) -> None:
    CALLS.append((2, recorded))
    conn.execute("CREATE INDEX IF NOT EXISTS items_value_idx ON items (value)")


SCHEMA = StoreSchema(
    recorded_as="demo_schema_migrations",
    migrations=(Migration(1, create_items), Migration(2, index_items)),
)


async def open_demo(path: Path) -> SqliteDatabase:
    return await SqliteDatabase.open(
        path, store_schema=SCHEMA, code=ErrorCode.INTERNAL, label="demo db"
    )


@pytest.fixture
def demo_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "dirs" / "demo.sqlite3"
