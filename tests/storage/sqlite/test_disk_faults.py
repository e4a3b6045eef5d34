"""A full database (SQLite's own ``SQLITE_FULL``) and an I/O error, in every store.

``PRAGMA max_page_count`` caps a database's size exactly as a full disk does (SQLite
answers ``SQLITE_FULL``, "database or disk is full"), without root or a small filesystem.
Every write then fails with ``internal``, ``details.reason: "no_space"``, ``storage:
"database"`` and ``retryable: true`` (the transaction was rolled back, nothing is
half-written), reads keep working, the database verifies, and writes work again as soon
as there is room, without reopening the store.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import STORAGE_HEALTH
from imagebridge.storage import SqliteJobStore, SqlitePresetStore
from imagebridge.storage.sqlite.database import SqliteDatabase
from imagebridge.storage.sqlite.sessions import SqliteSessionStore

from ..conftest import SCOPE, job_id, request


async def cap(database: SqliteDatabase, extra_pages: int | None) -> None:
    """Cap the file at its current size (a full disk), or lift the cap."""

    def apply(conn: sqlite3.Connection) -> None:
        if extra_pages is None:
            conn.execute("PRAGMA max_page_count = 1073741823")
            return
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        conn.execute(f"PRAGMA max_page_count = {pages + extra_pages}")

    await database.run(apply)


async def integrity(database: SqliteDatabase) -> str:
    return str(await database.run(lambda c: c.execute("PRAGMA integrity_check").fetchone()[0]))


def assert_full(error: BridgeError) -> None:
    assert error.code is ErrorCode.INTERNAL
    assert error.details["reason"] == "no_space"
    assert error.details["storage"] == "database"
    assert error.retryable
    assert STORAGE_HEALTH.reasons() == {"database": "no_space"}


async def create_job(store: SqliteJobStore, n: int, prompt: str) -> Any:
    import json

    return await store.create(
        SCOPE,
        job_id(n),
        json.dumps(request(prompt)),
        prompt,
        now=n,
        max_pending=1_000,
        max_database_bytes=1 << 30,
    )


async def test_a_full_job_database_refuses_writes_cleanly_and_recovers(db_path: Path) -> None:
    store = await SqliteJobStore.open(db_path)
    try:
        await create_job(store, 1, "kept")
        await cap(store._db, 0)
        big = "x" * 200_000  # needs new pages: refused
        with pytest.raises(BridgeError) as caught:
            await create_job(store, 2, big)
        assert_full(caught.value)

        assert (await store.get(SCOPE, job_id(1))).request()["prompt"] == "kept"  # reads work
        with pytest.raises(BridgeError):
            await store.get(SCOPE, job_id(2))  # nothing half-written
        assert await integrity(store._db) == "ok"

        await cap(store._db, None)  # space is back: the same store writes again
        await create_job(store, 2, big)
        assert (await store.get(SCOPE, job_id(2))).request()["prompt"] == big
        assert not STORAGE_HEALTH.degraded
    finally:
        await store.close()


async def test_a_full_preset_database_refuses_a_preset_cleanly(db_path: Path) -> None:
    store = await SqlitePresetStore.open(db_path)
    try:
        await store.create("kept", description=None, template_json={"prompt": "x"}, now=1)
        await cap(store._db, 0)
        template = {"prompt": "y" * 60_000}
        with pytest.raises(BridgeError) as caught:
            await store.create("big", description=None, template_json=template, now=2)
        assert_full(caught.value)
        assert [p.name for p in (await store.list()).items] == ["kept"]
        assert await integrity(store._db) == "ok"
        await cap(store._db, None)
        await store.create("big", description=None, template_json=template, now=2)
        assert not STORAGE_HEALTH.degraded
    finally:
        await store.close()


async def test_a_full_session_database_is_not_a_missing_session(db_path: Path) -> None:
    """The session store's own code is ``session`` (404); a full disk is not that."""
    store = await SqliteSessionStore.open(db_path, provider="codex-app-server")
    try:
        await store.put("kept", "thread-1", now=1)
        await cap(store._db, 0)
        caught = await fill_sessions(store)
        assert_full(caught)
        assert caught.http_status == 503  # retryable: nothing billed, not a missing session
        assert await store.get("kept") == "thread-1"
        assert await integrity(store._db) == "ok"
    finally:
        await store.close()


async def fill_sessions(store: SqliteSessionStore) -> BridgeError:
    """Bind sessions until the capped database refuses one; that refusal."""
    for n in range(2_000):
        try:
            await store.put(f"key-{n:05d}-" + "k" * 200, "t" * 200, now=2)
        except BridgeError as error:
            return error
    raise AssertionError("the capped database took every binding")
