"""SQLite migrations: idempotent, self-repairing, and a newer schema refused untouched."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.sqlite.inspection import inspect_schema

from .conftest import CALLS, SCHEMA, open_demo


async def test_migrations_are_idempotent_and_self_repairing(demo_path: Path) -> None:
    CALLS.clear()
    db = await open_demo(demo_path)
    await db.run(lambda c: c.execute("DROP INDEX items_value_idx"))
    await db.close()
    assert CALLS == [(1, False), (2, False)]

    CALLS.clear()
    db = await open_demo(demo_path)
    try:
        assert CALLS == [(1, True), (2, True)]
        names = await db.run(
            lambda c: [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='index'")]
        )
        assert "items_value_idx" in names
        versions = await db.run(
            lambda c: c.execute("SELECT version FROM demo_schema_migrations").fetchall()
        )
        assert sorted(v[0] for v in versions) == [1, 2]
    finally:
        await db.close()


async def test_newer_schema_is_refused_untouched(demo_path: Path) -> None:
    await (await open_demo(demo_path)).close()
    conn = sqlite3.connect(demo_path)
    conn.execute("INSERT INTO demo_schema_migrations VALUES (9, 1)")
    conn.commit()
    conn.close()
    with pytest.raises(BridgeError) as caught:
        await open_demo(demo_path)
    assert caught.value.code is ErrorCode.INTERNAL
    assert "newer" in caught.value.message
    assert caught.value.details["version"] == 9
    status = await inspect_schema(demo_path, SCHEMA, code=ErrorCode.INTERNAL, label="demo db")
    assert status.version == 9
    assert not status.current
