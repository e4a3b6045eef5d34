"""SqliteSharedJobStore specifics: side tables beside a plain job store, their upkeep, options.

The shared-queue behaviour both backends share is in tests/storage/test_shared_queue.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import JobEventKind, SqliteJobStore, SqliteSharedJobStore

from ..conftest import SCOPE, job_id, request
from ..test_shared_queue import ROOMY, add


async def test_sqlite_jobs_written_by_a_plain_store_are_claimable(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    async with await SqliteJobStore.open(path) as plain:
        body = request("legacy")
        await plain.create(SCOPE, job_id(1), body, "legacy", now=1, **ROOMY)
    async with await SqliteSharedJobStore.open(path) as shared:
        claimed = await shared.claim_next("node", ["anything"], now=2, lease_secs=5)
        assert claimed is not None
        assert claimed.id == job_id(1)
    # The queue's side tables leave the job schema as it was: a plain store still opens it.
    async with await SqliteJobStore.open(path) as plain:
        assert (await plain.get(SCOPE, job_id(1))).status is ImageJobStatus.RUNNING


async def test_sqlite_route_rows_do_not_outlive_their_jobs(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    async with await SqliteSharedJobStore.open(path) as store:
        await add(store, 1, "p", key="k")
        await add(store, 2, "p", key="k")  # replay: its route row is removed at once
        with pytest.raises(BridgeError):
            await add(store, 3, "p", max_pending=1, max_database_bytes=1 << 30)
        await store.request_cancel(SCOPE, job_id(1), now=200)
        assert await store.prune(now=200, retention_secs=0, max_retained=0, max_retained_bytes=0)
        await store.prune(now=200 + 3_600, retention_secs=0, max_retained=0, max_retained_bytes=0)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT job_id FROM job_queue").fetchall() == []
    finally:
        conn.close()


async def test_sqlite_notifications_are_trimmed_to_the_retained_count(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    async with await SqliteSharedJobStore.open(path, retained_events=3) as store:
        for n in range(10):
            await store.notify_job_event(JobEventKind.QUEUED, job_id(n))
    conn = sqlite3.connect(path)
    try:
        kept = [row[0] for row in conn.execute("SELECT job_id FROM job_queue_events ORDER BY seq")]
    finally:
        conn.close()
    assert kept == [job_id(7), job_id(8), job_id(9)]


async def test_sqlite_option_checks(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    for options in ({"event_poll_interval_s": 0}, {"retained_events": 0}):
        with pytest.raises(BridgeError) as caught:
            await SqliteSharedJobStore.open(path, **options)
        assert caught.value.code is ErrorCode.INTERNAL
    assert not path.exists()
