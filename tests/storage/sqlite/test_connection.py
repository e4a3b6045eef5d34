"""Reaching a SQLite file: a private file in a private directory, the pragmas, refused paths,
and WAL mode switched on while other connections open the same new file."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import SqliteJobStore
from imagebridge.storage.sqlite.jobs import inspect_job_schema

from .conftest import open_demo


async def test_open_creates_parents_and_sets_pragmas(demo_path: Path) -> None:
    db = await open_demo(demo_path)
    try:

        def pragmas(conn: sqlite3.Connection) -> tuple[object, ...]:
            return tuple(
                conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")
            )

        assert await db.run(pragmas) == ("wal", 2, 5000, 1)  # synchronous 2 = FULL
    finally:
        await db.close()
    assert os.stat(demo_path.parent).st_mode & 0o777 == 0o700


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


async def test_two_stores_can_create_one_fresh_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite3"
    stores = await asyncio.gather(*(SqliteJobStore.open(path) for _ in range(4)))
    try:
        assert all([await store.healthy() for store in stores])
    finally:
        for store in stores:
            await store.close()
    assert (await inspect_job_schema(path)).version == 5


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
    assert (await inspect_job_schema(path)).version == 5


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
