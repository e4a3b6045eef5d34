"""SqliteDatabase: safe opening, pragmas, migrations, the worker thread and clean errors."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import SqliteJobStore, inspect_job_schema
from imagebridge.storage.sqlite.database import Migration, Schema, SqliteDatabase, inspect_schema

CALLS: list[tuple[int, bool]] = []


def _create_items(conn: sqlite3.Connection, recorded: bool) -> None:
    CALLS.append((1, recorded))
    conn.execute("CREATE TABLE IF NOT EXISTS items (value TEXT NOT NULL)")


def _index_items(conn: sqlite3.Connection, recorded: bool) -> None:
    CALLS.append((2, recorded))
    conn.execute("CREATE INDEX IF NOT EXISTS items_value_idx ON items (value)")


SCHEMA = Schema(
    migrations_table="demo_schema_migrations",
    migrations=(Migration(1, _create_items), Migration(2, _index_items)),
)


async def open_demo(path: Path) -> SqliteDatabase:
    return await SqliteDatabase.open(path, schema=SCHEMA, code=ErrorCode.INTERNAL, label="demo db")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "dirs" / "demo.sqlite3"


async def test_open_creates_parents_and_sets_pragmas(path: Path) -> None:
    db = await open_demo(path)
    try:

        def pragmas(conn: sqlite3.Connection) -> tuple[object, ...]:
            return tuple(
                conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")
            )

        assert await db.run(pragmas) == ("wal", 2, 5000, 1)  # synchronous 2 = FULL
    finally:
        await db.close()
    assert os.stat(path.parent).st_mode & 0o777 == 0o700


async def test_calls_run_on_one_worker_thread_not_the_loop(path: Path) -> None:
    db = await open_demo(path)
    try:
        idents = await asyncio.gather(*(db.run(lambda _c: threading.get_ident()) for _ in range(5)))
        assert len(set(idents)) == 1
        assert idents[0] != threading.get_ident()
    finally:
        await db.close()


async def test_migrations_are_idempotent_and_self_repairing(path: Path) -> None:
    CALLS.clear()
    db = await open_demo(path)
    await db.run(lambda c: c.execute("DROP INDEX items_value_idx"))
    await db.close()
    assert CALLS == [(1, False), (2, False)]

    CALLS.clear()
    db = await open_demo(path)
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


async def test_newer_schema_is_refused_untouched(path: Path) -> None:
    await (await open_demo(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO demo_schema_migrations VALUES (9, 1)")
    conn.commit()
    conn.close()
    with pytest.raises(BridgeError) as caught:
        await open_demo(path)
    assert caught.value.code is ErrorCode.INTERNAL
    assert "newer" in caught.value.message
    assert caught.value.details["version"] == 9
    status = await inspect_schema(path, SCHEMA, code=ErrorCode.INTERNAL, label="demo db")
    assert status.version == 9
    assert not status.current


async def test_directory_and_corrupt_files_give_clean_errors(tmp_path: Path) -> None:
    directory = tmp_path / "a-directory"
    directory.mkdir()
    with pytest.raises(BridgeError) as not_file:
        await SqliteJobStore.open(directory)
    assert not_file.value.code is ErrorCode.INTERNAL
    assert not_file.value.message == "durable job database path must be a regular file"

    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(os.urandom(8192))
    with pytest.raises(BridgeError) as corrupt:
        await SqliteJobStore.open(garbage)
    assert corrupt.value.code is ErrorCode.INTERNAL
    assert corrupt.value.message == ("durable job database is unreadable or not a SQLite database")
    with pytest.raises(BridgeError) as inspected:
        await inspect_job_schema(garbage)
    assert inspected.value.code is ErrorCode.INTERNAL

    text = tmp_path / "notes.txt"
    text.write_text("SQLite format 3? no, just notes\n" * 200)
    with pytest.raises(BridgeError):
        await SqliteJobStore.open(text)
    assert text.read_text().startswith("SQLite format 3? no")


async def test_closed_database_refuses_calls(path: Path) -> None:
    db = await open_demo(path)
    await db.close()
    await db.close()  # idempotent
    assert db.closed
    with pytest.raises(BridgeError) as caught:
        await db.run(lambda c: c.execute("SELECT 1"))
    assert caught.value.message == "demo db is closed"


async def test_sqlite_errors_become_bridge_errors(path: Path) -> None:
    db = await open_demo(path)
    try:
        with pytest.raises(BridgeError) as caught:
            await db.run(lambda c: c.execute("SELECT * FROM no_such_table"))
        assert caught.value.code is ErrorCode.INTERNAL
        assert "no such table" in caught.value.details["reason"]
    finally:
        await db.close()


async def test_cancelled_caller_never_leaves_a_half_done_write(path: Path) -> None:
    db = await open_demo(path)
    started = threading.Event()

    def slow_write(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO items VALUES ('first')")
        started.set()
        time.sleep(0.05)
        conn.execute("INSERT INTO items VALUES ('second')")
        conn.execute("COMMIT")

    task = asyncio.create_task(db.run(slow_write))
    await asyncio.to_thread(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    rows = await db.run(lambda c: c.execute("SELECT value FROM items ORDER BY value").fetchall())
    await db.close()
    assert rows == [("first",), ("second",)]


async def test_two_stores_can_create_one_fresh_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite3"
    stores = await asyncio.gather(*(SqliteJobStore.open(path) for _ in range(4)))
    try:
        assert all([await store.healthy() for store in stores])
    finally:
        for store in stores:
            await store.close()
    assert (await inspect_job_schema(path)).version == 3


def _locked_rollback_journal_file(path: Path) -> sqlite3.Connection:
    """A new file still in rollback-journal mode, its write lock held by another connection
    (what another process opening the same new database at the same moment looks like)."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE other_process (value TEXT)")
    return holder


async def test_opening_waits_for_a_writer_that_holds_a_new_file_in_rollback_mode(
    tmp_path: Path,
) -> None:
    # SQLite refuses the switch to WAL at once (no busy handler) while that lock is held.
    path = tmp_path / "fresh.sqlite3"
    holder = _locked_rollback_journal_file(path)
    opening = asyncio.create_task(SqliteJobStore.open(path))
    await asyncio.sleep(0.2)
    holder.execute("COMMIT")
    holder.close()
    store = await opening
    try:
        assert await store.healthy()
    finally:
        await store.close()
    assert (await inspect_job_schema(path)).version == 3


async def test_a_writer_holding_a_new_file_longer_than_the_busy_timeout_is_busy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fresh.sqlite3"
    holder = _locked_rollback_journal_file(path)
    try:
        started = time.monotonic()
        with pytest.raises(BridgeError) as caught:
            await SqliteJobStore.open(path, busy_timeout_ms=150)
        assert time.monotonic() - started >= 0.15, "it waited for the busy timeout"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert caught.value.message == "durable job database is busy"
    assert caught.value.retryable is True


async def test_inspection_reads_a_live_wal_database(tmp_path: Path) -> None:
    path = tmp_path / "live.sqlite3"
    store = await SqliteJobStore.open(path)
    try:
        assert (await inspect_job_schema(path)).version == 3
        assert await store.healthy()
    finally:
        await store.close()
    assert not await store.healthy()


def test_schema_definitions_are_checked() -> None:
    with pytest.raises(ValueError, match="identifier"):
        Schema(migrations_table="bad name; DROP", migrations=())
    with pytest.raises(ValueError, match="numbered"):
        Schema(migrations_table="ok", migrations=(Migration(2, _create_items),))
