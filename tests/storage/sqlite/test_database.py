"""SqliteDatabase: one worker thread, never the loop; closed means closed; a cancelled caller
never leaves a half-done write."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError

from .conftest import open_demo


async def test_calls_run_on_one_worker_thread_not_the_loop(demo_path: Path) -> None:
    db = await open_demo(demo_path)
    try:
        idents = await asyncio.gather(*(db.run(lambda _c: threading.get_ident()) for _ in range(5)))
        assert len(set(idents)) == 1
        assert idents[0] != threading.get_ident()
    finally:
        await db.close()


async def test_closed_database_refuses_calls(demo_path: Path) -> None:
    db = await open_demo(demo_path)
    await db.close()
    await db.close()  # idempotent
    assert db.closed
    with pytest.raises(BridgeError) as caught:
        await db.run(lambda c: c.execute("SELECT 1"))
    assert caught.value.message == "demo db is closed"


async def test_cancelled_caller_never_leaves_a_half_done_write(demo_path: Path) -> None:
    db = await open_demo(demo_path)
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
