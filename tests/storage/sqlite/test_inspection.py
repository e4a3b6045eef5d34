"""Reading a SQLite store's schema version without changing anything."""

from __future__ import annotations

from pathlib import Path

from imagebridge.storage import SqliteJobStore
from imagebridge.storage.sqlite.jobs import inspect_job_schema


async def test_inspection_reads_a_live_wal_database(tmp_path: Path) -> None:
    path = tmp_path / "live.sqlite3"
    store = await SqliteJobStore.open(path)
    try:
        assert (await inspect_job_schema(path)).version == 5
        assert await store.healthy()
    finally:
        await store.close()
    assert not await store.healthy()
