"""SqliteJobStore: the original's sqlite_jobs.rs tests, then accounting, paging and edge cases."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import (
    ACTIVE_ROW_RESERVE_BYTES,
    LEGACY_SCOPE,
    ROW_OVERHEAD_BYTES,
    JobIdentity,
    JobStore,
    JobVisibility,
    SqliteJobStore,
    encode_job_cursor,
)
from imagebridge.storage.sqlite.jobs import inspect_job_schema

from ..conftest import OTHER_SCOPE, SCOPE, job_id, request, response, submit


def assert_not_found(error: BridgeError) -> None:
    assert error.code is ErrorCode.INVALID_REQUEST
    assert error.message == "durable job was not found"
    assert error.details["resource"] == "job"
    assert error.http_status == 404


async def run_to_success(store: SqliteJobStore, n: int, *, now: int = 2_000) -> None:
    assert await store.claim(SCOPE, job_id(n), now=now)
    await store.succeed(SCOPE, job_id(n), response(job_id(n)), now=now + 1)


# -- the behaviours the original's runtime/sqlite_jobs.rs tests check ----------------------------


async def test_lifecycle_survives_reopen_and_is_cursor_stable(db_path: Path) -> None:
    store = await SqliteJobStore.open(db_path)
    await submit(store, 1, "first", now=100)
    await submit(store, 2, "second", now=101)
    assert await store.claim(SCOPE, job_id(1), now=102)
    assert await store.progress(SCOPE, job_id(1), stage="provider", partial_images=2, now=103)
    done = await store.succeed(SCOPE, job_id(1), response(job_id(1)), now=104)
    assert done.status is ImageJobStatus.SUCCEEDED
    assert done.progress_stage == "completed"
    assert (done.started_at, done.completed_at, done.updated_at) == (102, 104, 104)

    first = await store.list(SCOPE, limit=1)
    assert [item.id for item in first.items] == [job_id(2)]
    assert first.next_cursor is not None
    second = await store.list(SCOPE, limit=1, cursor=first.next_cursor)
    assert [item.id for item in second.items] == [job_id(1)]
    assert second.next_cursor is None
    await store.close()

    reopened = await SqliteJobStore.open(db_path)
    try:
        job = await reopened.get(SCOPE, job_id(1))
        assert job.status is ImageJobStatus.SUCCEEDED
        assert job.partial_images == 2
        result = job.response()
        assert result is not None
        assert result["id"] == job_id(1)
        again = await reopened.list(SCOPE, limit=1, cursor=first.next_cursor)
        assert [item.id for item in again.items] == [job_id(1)]
    finally:
        await reopened.close()


async def test_recovery_never_retries_ambiguous_running_work(store: SqliteJobStore) -> None:
    await submit(store, 1)
    await submit(store, 2)
    assert await store.claim(SCOPE, job_id(1), now=1_500)
    await store.progress(SCOPE, job_id(1), stage="provider_progress", partial_images=1, now=1_501)

    assert await store.recover_interrupted(now=1_600) == 1
    job = await store.get(SCOPE, job_id(1))
    assert job.status is ImageJobStatus.INTERRUPTED
    assert job.completed_at == 1_600
    # As in the original: recovery leaves the last stage in place.
    assert job.progress_stage == "provider_progress"
    error = job.error()
    assert error is not None
    assert error["code"] == "cancelled"
    assert error["message"] == "bridge stopped while provider completion was uncertain"
    assert error["retryable"] is False
    assert error["details"] == {"recovery": "inspect_history_before_retrying"}
    assert not await store.claim(SCOPE, job_id(1), now=1_700)
    # Queued work is untouched, and a second recovery finds nothing.
    assert (await store.get(SCOPE, job_id(2))).status is ImageJobStatus.QUEUED
    assert await store.recover_interrupted(now=1_700) == 0


async def test_queued_cancellation_is_immediate_and_durable(db_path: Path) -> None:
    store = await SqliteJobStore.open(db_path)
    await submit(store, 1, now=10)
    cancelled = await store.request_cancel(SCOPE, job_id(1), now=11)
    assert cancelled.status is ImageJobStatus.CANCELLED
    assert cancelled.cancel_requested
    assert cancelled.completed_at == 11
    assert cancelled.progress_stage == "completed"
    assert cancelled.error_json is None
    assert not await store.claim(SCOPE, job_id(1), now=12)
    stats = await store.statistics()
    assert (stats.total, stats.cancelled, stats.queued, stats.running, stats.hidden) == (
        1,
        1,
        0,
        0,
        0,
    )
    assert stats.database_bytes > 0
    await store.close()
    reopened = await SqliteJobStore.open(db_path)
    try:
        assert (await reopened.get(SCOPE, job_id(1))).status is ImageJobStatus.CANCELLED
    finally:
        await reopened.close()


async def test_pending_capacity_rejects_without_persisting_extra_work(
    store: SqliteJobStore,
) -> None:
    await submit(store, 1, max_pending=1)
    with pytest.raises(BridgeError) as caught:
        await submit(store, 2, max_pending=1)
    assert caught.value.code is ErrorCode.OVERLOADED
    assert caught.value.retryable
    assert caught.value.message == "durable job queue is full"
    assert caught.value.http_status == 503
    assert (await store.statistics()).total == 1
    with pytest.raises(BridgeError) as missing:
        await store.get(SCOPE, job_id(2))
    assert_not_found(missing.value)


async def test_logical_database_budget_rejects_before_persistence(
    store: SqliteJobStore,
) -> None:
    with pytest.raises(BridgeError) as caught:
        await submit(store, 1, max_database_bytes=ACTIVE_ROW_RESERVE_BYTES - 1)
    assert caught.value.code is ErrorCode.OVERLOADED
    assert caught.value.retryable
    assert caught.value.message == "durable job queue is full"
    stats = await store.statistics()
    assert (stats.total, stats.logical_bytes) == (0, 0)


async def test_pruning_enforces_terminal_logical_byte_budget(store: SqliteJobStore) -> None:
    await submit(store, 1, now=10)
    await submit(store, 2, now=20)
    await run_to_success(store, 1, now=30)
    await run_to_success(store, 2, now=40)
    one_job = (await store.get(SCOPE, job_id(2))).logical_bytes
    assert (await store.statistics()).logical_bytes > one_job

    removed = await store.prune(
        now=50, retention_secs=10_000, max_retained=100, max_retained_bytes=one_job
    )
    assert removed == 1
    assert (await store.statistics()).logical_bytes <= one_job
    with pytest.raises(BridgeError) as gone:
        await store.get(SCOPE, job_id(1))
    assert_not_found(gone.value)
    assert (await store.get(SCOPE, job_id(2))).status is ImageJobStatus.SUCCEEDED


async def test_submission_idempotency_is_atomic_scoped_and_persistent(db_path: Path) -> None:
    body = request("a lighthouse", idempotency_key="key-1")
    store = await SqliteJobStore.open(db_path)
    first = await submit(store, 1, key="key-1", body=body)
    assert first.created
    stored = first.job.request()
    assert "idempotency_key" not in stored
    assert first.job.submission_key_hash != "key-1"
    assert "key-1" not in first.job.request_json

    # Replay wins over capacity: the queue (max 1) is already full.
    replay = await submit(store, 2, key="key-1", body=body, max_pending=1)
    assert (replay.created, replay.job.id) == (False, job_id(1))
    assert "idempotency_key" not in replay.job.request()

    elsewhere = await submit(store, 3, key="key-1", body=body, scope=OTHER_SCOPE)
    assert elsewhere.created
    assert elsewhere.job.id == job_id(3)

    with pytest.raises(BridgeError) as conflict:
        await submit(store, 4, key="key-1", body=request("a different lighthouse"))
    assert conflict.value.code is ErrorCode.IDEMPOTENCY_CONFLICT
    assert conflict.value.message == "idempotency key was already used for a different request"
    assert conflict.value.http_status == 409
    assert (await store.statistics()).total == 2
    await store.close()

    reopened = await SqliteJobStore.open(db_path)
    try:
        again = await submit(reopened, 5, key="key-1", body=body)
        assert (again.created, again.job.id) == (False, job_id(1))
    finally:
        await reopened.close()


async def test_caller_operations_never_cross_authorization_scopes(store: SqliteJobStore) -> None:
    await submit(store, 1)
    for call in (
        store.get(OTHER_SCOPE, job_id(1)),
        store.request_cancel(OTHER_SCOPE, job_id(1), now=2_000),
        store.update_history(OTHER_SCOPE, job_id(1), favorite=True, now=2_000),
    ):
        with pytest.raises(BridgeError) as caught:
            await call
        assert_not_found(caught.value)
    assert (await store.list(OTHER_SCOPE, visibility="all")).items == []
    assert not await store.claim(OTHER_SCOPE, job_id(1), now=2_000)
    assert await store.claim(SCOPE, job_id(1), now=2_000)
    assert not await store.progress(
        OTHER_SCOPE, job_id(1), stage="provider", partial_images=0, now=2_001
    )
    with pytest.raises(BridgeError) as caught:
        await store.succeed(OTHER_SCOPE, job_id(1), response(job_id(1)), now=2_002)
    assert_not_found(caught.value)
    job = await store.get(SCOPE, job_id(1))
    assert (job.status, job.cancel_requested, job.favorite, job.progress_stage) == (
        ImageJobStatus.RUNNING,
        False,
        False,
        "starting",
    )


async def test_concurrent_identical_submissions_converge_on_one_job(db_path: Path) -> None:
    body = request("twins", idempotency_key="same")
    # Two stores on one file: two connections on two worker threads really race in SQLite.
    left = await SqliteJobStore.open(db_path)
    right = await SqliteJobStore.open(db_path)
    try:
        results = await asyncio.gather(
            submit(left, 1, key="same", body=body), submit(right, 2, key="same", body=body)
        )
        assert sorted(r.created for r in results) == [False, True]
        assert results[0].job.id == results[1].job.id
        assert (await left.statistics()).total == 1
    finally:
        await left.close()
        await right.close()


async def test_database_symlinks_are_rejected(tmp_path: Path) -> None:
    target = tmp_path / "real.sqlite3"
    await (await SqliteJobStore.open(target)).close()  # a real database behind the link
    link = tmp_path / "link.sqlite3"
    link.symlink_to(target)
    with pytest.raises(BridgeError) as caught:
        await SqliteJobStore.open(link)
    assert caught.value.code is ErrorCode.INTERNAL
    assert "symbolic link" in caught.value.message
    dangling = tmp_path / "dangling.sqlite3"
    dangling.symlink_to(tmp_path / "nowhere.sqlite3")
    with pytest.raises(BridgeError):
        await SqliteJobStore.open(dangling)
    assert not (tmp_path / "nowhere.sqlite3").exists()


async def test_history_updates_only_soft_delete_terminal_jobs(store: SqliteJobStore) -> None:
    await submit(store, 1, now=100)
    with pytest.raises(BridgeError) as caught:
        await store.update_history(SCOPE, job_id(1), deleted=True, now=101)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.field == "deleted"
    with pytest.raises(BridgeError) as restore_active:
        await store.update_history(SCOPE, job_id(1), deleted=False, now=101)
    assert restore_active.value.field == "deleted"

    await run_to_success(store, 1, now=110)
    updated = await store.update_history(SCOPE, job_id(1), favorite=True, deleted=True, now=120)
    assert (updated.favorite, updated.deleted_at, updated.updated_at) == (True, 120, 120)
    assert (await store.list(SCOPE)).items == []
    hidden = await store.list(SCOPE, visibility=JobVisibility.HIDDEN)
    assert [item.id for item in hidden.items] == [job_id(1)]
    assert (await store.statistics()).hidden == 1

    restored = await store.update_history(SCOPE, job_id(1), deleted=False, now=130)
    assert restored.deleted_at is None
    assert [item.id for item in (await store.list(SCOPE)).items] == [job_id(1)]

    assert await store.prune(now=10**6, retention_secs=1, max_retained=0, max_retained_bytes=0) == 0
    await store.update_history(SCOPE, job_id(1), favorite=False, now=140)
    assert await store.prune(now=10**6, retention_secs=1, max_retained=0, max_retained_bytes=0) == 1


async def test_history_update_requires_a_change(store: SqliteJobStore) -> None:
    await submit(store, 1)
    with pytest.raises(BridgeError) as caught:
        await store.update_history(SCOPE, job_id(1), now=5_000)
    assert caught.value.message == "history update must change favorite or deleted state"
    assert caught.value.http_status == 422


async def test_history_filters_apply_before_cursor_pagination(store: SqliteJobStore) -> None:
    await submit(store, 1, "Render with 100% coverage", now=10)
    await submit(store, 2, "Paint a BLUE_sky", now=20)
    await submit(store, 3, "Červená RŮŽE", now=30)
    await submit(store, 4, "1000 red balloons", now=40)
    await submit(store, 5, "blueXsky and 100 cats", now=50)
    for n in range(1, 6):
        await run_to_success(store, n, now=100 + n * 10)
    await store.update_history(SCOPE, job_id(1), favorite=True, now=200)
    await store.update_history(SCOPE, job_id(2), deleted=True, now=200)

    async def ids(**filters: Any) -> list[str]:
        return [item.id for item in (await store.list(SCOPE, **filters)).items]

    assert await ids(search="100%", favorite=True) == [job_id(1)]
    assert await ids(search="100%") == [job_id(1)]
    assert await ids(search="blue_", visibility="hidden") == [job_id(2)]
    assert await ids(search="blue_", visibility="all") == [job_id(2)]
    assert await ids(search="blue_") == []
    assert await ids(search="červená") == [job_id(3)]
    assert await ids(search="  ČERVENÁ růže ") == [job_id(3)]
    assert await ids(search="' OR 1=1 --") == []
    assert await ids(search="   ") == [job_id(n) for n in (5, 4, 3, 1)]

    favorites = await store.list(SCOPE, favorite=True, limit=1)
    assert [item.id for item in favorites.items] == [job_id(1)]
    assert favorites.next_cursor is None
    after = encode_job_cursor(30, job_id(3))
    assert (await store.list(SCOPE, favorite=True, cursor=after)).items[0].id == job_id(1)
    past = encode_job_cursor(10, job_id(1))
    assert (await store.list(SCOPE, favorite=True, cursor=past)).items == []
    succeeded = await store.list(SCOPE, status="succeeded", limit=2)
    assert [item.id for item in succeeded.items] == [job_id(5), job_id(4)]
    assert succeeded.next_cursor is not None
    rest = await store.list(SCOPE, status="succeeded", limit=2, cursor=succeeded.next_cursor)
    assert [item.id for item in rest.items] == [job_id(3), job_id(1)]
    assert rest.next_cursor is None


_V1_DDL = """
        CREATE TABLE job_schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER);
        INSERT INTO job_schema_migrations VALUES (1, 1);
        CREATE TABLE image_jobs (
            id TEXT PRIMARY KEY NOT NULL,
            status TEXT NOT NULL CHECK (status IN
                ('queued','running','succeeded','failed','cancelled','interrupted')),
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            started_at INTEGER,
            completed_at INTEGER,
            request_json TEXT NOT NULL,
            {prompt_column}
            progress_stage TEXT,
            partial_images INTEGER NOT NULL DEFAULT 0,
            response_json TEXT,
            error_json TEXT,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            favorite INTEGER NOT NULL DEFAULT 0,
            deleted_at INTEGER
        );
"""


def _build_v1_database(path: Path, *, with_prompt_search: bool) -> None:
    conn = sqlite3.connect(path)
    prompt_column = "prompt_search TEXT NOT NULL DEFAULT ''," if with_prompt_search else ""
    conn.executescript(_V1_DDL.replace("{prompt_column}", prompt_column))
    rows = [
        (job_id(1), "succeeded", 10, 12, json.dumps(request("Ein GROẞES Schloss")), '{"id":"x"}'),
        (job_id(2), "queued", 20, 20, json.dumps(request("Šťastný DRAK")), None),
    ]
    conn.executemany(
        "INSERT INTO image_jobs (id, status, created_at, updated_at, request_json, "
        "response_json) VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("with_prompt_search", [False, True])
async def test_version_one_database_migrates_prompt_search_without_losing_jobs(
    tmp_path: Path, with_prompt_search: bool
) -> None:
    path = tmp_path / "v1.sqlite3"
    _build_v1_database(path, with_prompt_search=with_prompt_search)
    assert (await inspect_job_schema(path)).version == 1

    store = await SqliteJobStore.open(path)
    try:
        status = await inspect_job_schema(path)
        assert (status.version, status.current_version, status.current) == (5, 5, True)
        everything = await store.list(LEGACY_SCOPE, visibility="all")
        assert [item.id for item in everything.items] == [job_id(2), job_id(1)]
        found = await store.list(LEGACY_SCOPE, search="šťastný drak")
        assert [item.id for item in found.items] == [job_id(2)]
        assert (await store.list(SCOPE, visibility="all")).items == []
        legacy = await store.get(LEGACY_SCOPE, job_id(1))
        assert legacy.response() == {"id": "x"}
        assert legacy.logical_bytes > 0
        # Legacy queued work still counts against the budget and the queue.
        assert (await store.statistics()).queued == 1
    finally:
        await store.close()

    # Damage the v2 back-fill and forget its marker: the next open repairs both.
    conn = sqlite3.connect(path)
    conn.execute("UPDATE image_jobs SET prompt_search = ''")
    conn.execute("DELETE FROM job_schema_migrations WHERE version = 2")
    conn.commit()
    conn.close()
    store = await SqliteJobStore.open(path)
    try:
        found = await store.list(LEGACY_SCOPE, search="GROẞES")
        assert [item.id for item in found.items] == [job_id(1)]
        assert (await inspect_job_schema(path)).version == 5
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    versions = [row[0] for row in conn.execute("SELECT version FROM job_schema_migrations")]
    conn.close()
    assert sorted(versions) == [1, 2, 3, 4, 5]


# -- submission rules and accounting ------------------------------------------------------------


async def test_logical_bytes_follow_the_documented_formula(store: SqliteJobStore) -> None:
    body = request("Grüße")
    created = await submit(store, 1, key="k", body=body)
    text = created.job.request_json
    fixed = (
        len(job_id(1))
        + len(SCOPE)
        + len(text.encode())
        + len("grüße".encode())
        + 64  # sha256 hex of the key
        + 64  # fingerprint
    )
    assert created.job.logical_bytes == fixed + ACTIVE_ROW_RESERVE_BYTES + ROW_OVERHEAD_BYTES
    assert (await store.statistics()).logical_bytes == created.job.logical_bytes

    await store.claim(SCOPE, job_id(1), now=2_000)
    assert (await store.statistics()).logical_bytes == created.job.logical_bytes
    result = response(job_id(1))
    done = await store.succeed(SCOPE, job_id(1), result, now=2_001)
    result_bytes = len(done.response_json.encode()) if done.response_json else 0
    assert done.logical_bytes == fixed + result_bytes + ROW_OVERHEAD_BYTES
    assert (await store.statistics()).logical_bytes == done.logical_bytes


async def test_budget_admits_exactly_the_charged_size(store: SqliteJobStore) -> None:
    probe = await submit(store, 1)
    size = probe.job.logical_bytes
    await store.request_cancel(SCOPE, job_id(1), now=5_000)
    await store.prune(now=5_000, retention_secs=0, max_retained=0, max_retained_bytes=0)
    assert (await store.statistics()).logical_bytes == 0
    # Same shape of row, same size: a budget of exactly that admits it, one less does not.
    with pytest.raises(BridgeError):
        await submit(store, 2, max_database_bytes=size - 1)
    assert (await submit(store, 2, max_database_bytes=size)).created


async def test_idempotency_key_rules(store: SqliteJobStore) -> None:
    body = request("x")
    for key in ("", "   ", "bad\nkey", "k" * 513):
        with pytest.raises(BridgeError) as caught:
            await submit(store, 1, key=key, body=body)
        assert caught.value.code is ErrorCode.INVALID_REQUEST
        assert caught.value.field == "idempotency_key"
    assert (await submit(store, 1, key="k" * 512, body=body)).created


async def test_scope_rules(store: SqliteJobStore) -> None:
    for scope in ("", "x" * 257, "tab\there"):
        with pytest.raises(BridgeError) as caught:
            await submit(store, 1, scope=scope)
        assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert (await submit(store, 1, scope="s" * 256)).created


async def test_request_text_is_stored_without_the_key(store: SqliteJobStore) -> None:
    text = json.dumps(request("from text", idempotency_key="abc"))
    created = await store.create(
        SCOPE,
        job_id(1),
        text,
        "from text",
        submission_key="abc",
        fingerprint="0" * 64,
        now=1,
        max_pending=10,
        max_database_bytes=1 << 30,
    )
    assert created.job.request() == request("from text")
    with pytest.raises(BridgeError) as caught:
        await store.create(
            SCOPE, job_id(2), "[1, 2]", "x", now=1, max_pending=10, max_database_bytes=1 << 30
        )
    assert caught.value.code is ErrorCode.INVALID_REQUEST


async def test_duplicate_job_id_is_refused_without_change(store: SqliteJobStore) -> None:
    await submit(store, 1, "original")
    with pytest.raises(BridgeError) as caught:
        await submit(store, 1, "impostor")
    assert caught.value.code is ErrorCode.INTERNAL
    assert (await store.get(SCOPE, job_id(1))).request()["prompt"] == "original"


async def test_same_store_concurrent_keyed_creates_converge(store: SqliteJobStore) -> None:
    body = request("crowd", idempotency_key="one")
    results = await asyncio.gather(*(submit(store, n, key="one", body=body) for n in range(8)))
    assert sum(r.created for r in results) == 1
    assert len({r.job.id for r in results}) == 1
    assert (await store.statistics()).total == 1


def test_threads_with_their_own_loops_converge_on_one_job(db_path: Path) -> None:
    body = request("threads", idempotency_key="t")
    barrier = threading.Barrier(4)
    outcomes: list[tuple[bool, str]] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        async def main() -> None:
            store = await SqliteJobStore.open(db_path)
            try:
                barrier.wait(timeout=10)
                result = await submit(store, n, key="t", body=body)
                with lock:
                    outcomes.append((result.created, result.job.id))
            finally:
                await store.close()

        asyncio.run(main())

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(outcomes) == 4
    assert sum(created for created, _ in outcomes) == 1
    assert len({job for _, job in outcomes}) == 1


# -- worker transitions -------------------------------------------------------------------------


async def test_claim_only_takes_queued_uncancelled_jobs(store: SqliteJobStore) -> None:
    await submit(store, 1, now=100)
    assert await store.claim(SCOPE, job_id(1), now=90)  # a clock that went backwards
    job = await store.get(SCOPE, job_id(1))
    assert (job.status, job.progress_stage, job.started_at, job.updated_at) == (
        ImageJobStatus.RUNNING,
        "starting",
        100,
        100,
    )
    assert not await store.claim(SCOPE, job_id(1), now=101)


async def test_running_cancel_only_flags_the_job(store: SqliteJobStore) -> None:
    await submit(store, 1)
    await store.claim(SCOPE, job_id(1), now=2_000)
    flagged = await store.request_cancel(SCOPE, job_id(1), now=2_001)
    assert (flagged.status, flagged.cancel_requested) == (ImageJobStatus.RUNNING, True)
    finished = await store.fail(
        SCOPE,
        job_id(1),
        "cancelled",
        BridgeError(ErrorCode.CANCELLED, "cancelled by caller").to_dict(),
        now=2_002,
    )
    assert finished.status is ImageJobStatus.CANCELLED
    unchanged = await store.request_cancel(SCOPE, job_id(1), now=2_003)
    assert unchanged == finished


async def test_progress_rules(store: SqliteJobStore) -> None:
    await submit(store, 1)
    assert not await store.progress(SCOPE, job_id(1), stage="provider", partial_images=0, now=1)
    await store.claim(SCOPE, job_id(1), now=2_000)
    for stage in ("", "x" * 65, "has space", "ünï", "a.b"):
        with pytest.raises(BridgeError) as caught:
            await store.progress(SCOPE, job_id(1), stage=stage, partial_images=0, now=2_001)
        assert caught.value.code is ErrorCode.INVALID_REQUEST
    with pytest.raises(BridgeError):
        await store.progress(SCOPE, job_id(1), stage="ok", partial_images=-1, now=2_001)
    assert await store.progress(
        SCOPE, job_id(1), stage="partial_image-" + "x" * 50, partial_images=3, now=2_001
    )
    job = await store.get(SCOPE, job_id(1))
    assert (job.progress_stage, job.partial_images) == ("partial_image-" + "x" * 50, 3)


async def test_oversized_result_keeps_the_job_running_for_a_trimmed_retry(
    store: SqliteJobStore,
) -> None:
    await submit(store, 1)
    await store.claim(SCOPE, job_id(1), now=2_000)
    huge = response(job_id(1), revised_prompt="x" * store.max_result_bytes)
    with pytest.raises(BridgeError) as caught:
        await store.succeed(SCOPE, job_id(1), huge, now=2_001)
    assert caught.value.code is ErrorCode.ARTIFACT
    assert caught.value.message == "durable job result metadata exceeds the storage reserve"
    assert caught.value.details["max_result_bytes"] == store.max_result_bytes
    assert (await store.get(SCOPE, job_id(1))).status is ImageJobStatus.RUNNING
    trimmed = await store.succeed(SCOPE, job_id(1), response(job_id(1)), now=2_002)
    assert trimmed.status is ImageJobStatus.SUCCEEDED


async def test_oversized_error_is_replaced(store: SqliteJobStore) -> None:
    await submit(store, 1)
    await store.claim(SCOPE, job_id(1), now=2_000)
    huge = BridgeError(ErrorCode.UPSTREAM, "y" * 300_000).to_dict()
    failed = await store.fail(SCOPE, job_id(1), ImageJobStatus.FAILED, huge, now=2_001)
    error = failed.error()
    assert error is not None
    assert error["code"] == "internal"
    assert error["message"] == "durable job failed with oversized error metadata"
    assert error["details"]["original_code"] == "upstream"
    assert failed.logical_bytes < 10_000


async def test_finishing_needs_a_running_job(store: SqliteJobStore) -> None:
    await submit(store, 1)
    with pytest.raises(BridgeError) as caught:
        await store.succeed(SCOPE, job_id(1), response(job_id(1)), now=2_000)
    assert caught.value.code is ErrorCode.INTERNAL
    with pytest.raises(BridgeError) as bad_status:
        await store.fail(SCOPE, job_id(1), "succeeded", {"code": "internal"}, now=2_000)
    assert bad_status.value.code is ErrorCode.INTERNAL
    assert (await store.get(SCOPE, job_id(1))).status is ImageJobStatus.QUEUED


async def test_queued_identities_page_through_every_queued_job(store: SqliteJobStore) -> None:
    for n in range(1, 8):
        await submit(store, n, scope=SCOPE if n % 2 else OTHER_SCOPE, now=100 + n // 2)
    await store.claim(SCOPE, job_id(3), now=200)
    seen: list[JobIdentity] = []
    after: JobIdentity | None = None
    while True:
        page = await store.queued_identities(2, after=after)
        if not page:
            break
        seen.extend(page)
        after = page[-1]
    assert [identity.id for identity in seen] == [job_id(n) for n in (1, 2, 4, 5, 6, 7)]
    assert {identity.auth_scope for identity in seen} == {SCOPE, OTHER_SCOPE}
    assert seen == sorted(seen, key=lambda i: (i.created_at, i.id))


# -- listing rules and cursors ------------------------------------------------------------------


async def test_list_rejects_bad_filters(store: SqliteJobStore) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"visibility": "deleted"}, "visibility"),
        ({"status": "done"}, "status"),
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"search": "x" * 513}, "search"),
        ({"search": "line\nbreak"}, "search"),
        ({"cursor": "not a cursor"}, "cursor"),
        ({"cursor": encode_job_cursor(1, "not-a-uuid")}, "cursor"),
    ]
    for filters, field in cases:
        with pytest.raises(BridgeError) as caught:
            await store.list(SCOPE, **filters)
        assert caught.value.code is ErrorCode.INVALID_REQUEST, filters
        assert caught.value.field == field
    assert (await store.list(SCOPE, search="é" * 256, limit=100)).items == []


async def test_unknown_or_non_uuid_ids_are_not_found(store: SqliteJobStore) -> None:
    for bad in (job_id(9), "../etc/passwd", job_id(9).upper()):
        with pytest.raises(BridgeError) as caught:
            await store.get(SCOPE, bad)
        assert_not_found(caught.value)


_TRICKY = st.sampled_from(list("aAzZ%_\\'\"ßẞΣσςİiIıÅå 0"))
_PROMPT_TEXT = st.text(alphabet=st.one_of(_TRICKY, st.characters()), max_size=24)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(prompts=st.lists(_PROMPT_TEXT, min_size=1, max_size=6), data=st.data())
def test_search_only_ever_matches_literally(
    tmp_path_factory: pytest.TempPathFactory, prompts: list[str], data: st.DataObject
) -> None:
    source = data.draw(st.sampled_from(prompts))
    start = data.draw(st.integers(0, len(source)))
    piece = source[start : start + data.draw(st.integers(0, 8))]
    needle = data.draw(
        st.one_of(
            _PROMPT_TEXT.map(lambda text: text[:8]),
            st.sampled_from(["%", "_", "\\", "%%", "_%", "\\%", "'", '"', "' OR 1=1 --"]),
            st.sampled_from([piece, piece.upper(), piece.swapcase(), f"%{piece}_"]),
        )
    )

    def storable(text: str) -> bool:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True

    prompts = [p for p in prompts if storable(p)]
    path = tmp_path_factory.mktemp("search") / "jobs.sqlite3"

    async def main() -> None:
        store = await SqliteJobStore.open(path)
        try:
            for n, prompt in enumerate(prompts):
                await submit(store, n, body=request(prompt))
            try:
                page = await store.list(SCOPE, visibility="all", search=needle, limit=100)
            except BridgeError as error:
                # Only the documented refusals: too long, control characters, bad UTF-8.
                assert error.field == "search"
                trimmed = needle.strip()
                assert (
                    not storable(trimmed)
                    or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in trimmed)
                    or len(trimmed.encode()) > 512
                )
                return
            got = {item.id for item in page.items}
            trimmed = needle.strip()
            expected = {
                job_id(n)
                for n, p in enumerate(prompts)
                if not trimmed or trimmed.lower() in p.lower()
            }
            assert got == expected
        finally:
            await store.close()

    asyncio.run(main())


# -- schema, integrity, protocol ----------------------------------------------------------------


async def test_store_satisfies_the_protocol(store: SqliteJobStore) -> None:
    assert isinstance(store, JobStore)


async def test_integrity_check_is_clean_after_a_workload(db_path: Path) -> None:
    store = await SqliteJobStore.open(db_path)
    for n in range(40):
        await submit(store, n, f"prompt {n} ✓", key=f"k{n}" if n % 3 else None)
    for n in range(0, 40, 2):
        await store.claim(SCOPE, job_id(n), now=5_000)
    for n in range(0, 40, 4):
        await store.succeed(SCOPE, job_id(n), response(job_id(n)), now=5_001)
    for n in range(2, 40, 4):
        await store.fail(SCOPE, job_id(n), "failed", {"code": "upstream", "message": "x"}, now=1)
    for n in range(1, 40, 4):
        await store.request_cancel(SCOPE, job_id(n), now=5_002)
    await store.update_history(SCOPE, job_id(0), favorite=True, deleted=True, now=5_003)
    await store.prune(now=5_004, retention_secs=10**6, max_retained=5, max_retained_bytes=1 << 30)
    stats = await store.statistics()
    await store.close()

    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        total, recomputed = conn.execute(
            "SELECT COUNT(*), SUM(logical_bytes) FROM image_jobs"
        ).fetchone()
    finally:
        conn.close()
    assert total == stats.total
    assert recomputed == stats.logical_bytes
    assert stats.succeeded + stats.failed + stats.cancelled <= 6  # favourite + 5 retained


async def test_inspect_job_schema_is_read_only(tmp_path: Path) -> None:
    missing = tmp_path / "absent" / "jobs.sqlite3"
    status = await inspect_job_schema(missing)
    assert status.to_dict() == {"initialized": False, "version": None, "current_version": 5}
    assert os.listdir(tmp_path) == []


async def test_store_files_are_private(db_path: Path) -> None:
    store = await SqliteJobStore.open(db_path)
    await store.close()
    info = os.stat(db_path)
    assert stat.S_ISREG(info.st_mode)
    assert info.st_mode & 0o777 == 0o600


async def test_result_and_error_limits_are_configurable(db_path: Path) -> None:
    async with await SqliteJobStore.open(
        db_path, max_result_bytes=200, max_error_bytes=300
    ) as store:
        assert store.max_result_bytes == 200
        await submit(store, 1)
        await submit(store, 2)
        await store.claim(SCOPE, job_id(1), now=2_000)
        await store.claim(SCOPE, job_id(2), now=2_000)
        with pytest.raises(BridgeError) as caught:
            await store.succeed(
                SCOPE, job_id(1), response(job_id(1), revised_prompt="x" * 200), now=2_001
            )
        assert caught.value.details["max_result_bytes"] == 200
        small = await store.succeed(SCOPE, job_id(1), {"id": job_id(1), "data": []}, now=2_002)
        assert small.status is ImageJobStatus.SUCCEEDED
        error = BridgeError(ErrorCode.UPSTREAM, "upstream said no " * 20).to_dict()
        failed = await store.fail(SCOPE, job_id(2), "failed", error, now=2_003)
        stored = failed.error()
        assert stored is not None
        assert stored["message"] == "durable job failed with oversized error metadata"
