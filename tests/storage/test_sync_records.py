"""Synchronous requests' records in the jobs table, on both backends (issue 39).

``open_record`` writes a row that runs from the start (``origin`` names the surface),
keyed requests meet at the unique index in a namespace of their own, ``find_retry`` finds
the record a marked retry repeats, a known failure forgets its key, and in shared mode a
record is held under its instance's lease like a claimed job. Databases of the previous
schema version (SQLite 3, PostgreSQL 1) are upgraded in place: every older row is a job.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import JobOrigin, PostgresSharedJobStore, SharedJobStore
from imagebridge.storage.sqlite.jobs import SqliteJobStore, inspect_job_schema

from .conftest import ROOMY, SCOPE, OpenShared, job_id, request, response

FINGERPRINT = "f" * 64
OTHER_FINGERPRINT = "e" * 64


async def record(
    store: SharedJobStore,
    n: int,
    *,
    origin: JobOrigin = JobOrigin.SYNC,
    fingerprint: str = FINGERPRINT,
    key: str | None = None,
    now: int | None = None,
    scope: str = SCOPE,
    lease: tuple[str, int] | None = None,
) -> Any:
    body = request(f"record {n}")
    return await store.open_record(
        scope,
        job_id(n),
        body,
        body["prompt"],
        origin=origin,
        fingerprint=fingerprint,
        sync_key=key,
        now=now if now is not None else 100 + n,
        lease=lease,
    )


async def test_a_record_runs_from_the_start_and_lists_beside_jobs(
    shared_store: SharedJobStore,
) -> None:
    await shared_store.create(SCOPE, job_id(1), request("a job"), "a job", now=100, **ROOMY)
    opened = await record(shared_store, 2, origin=JobOrigin.OPENAI)
    assert opened.created
    row = opened.job
    assert (row.status, row.origin, row.progress_stage) == (
        ImageJobStatus.RUNNING,
        JobOrigin.OPENAI,
        "starting",
    )
    assert row.started_at == row.created_at == 102
    assert row.request_fingerprint == FINGERPRINT
    everything = await shared_store.list(SCOPE)
    assert [item.id for item in everything.items] == [job_id(2), job_id(1)]
    only = await shared_store.list(SCOPE, origin="openai")
    assert [item.id for item in only.items] == [job_id(2)]
    assert [i.id for i in (await shared_store.list(SCOPE, origin="job")).items] == [job_id(1)]
    with pytest.raises(BridgeError) as bad:
        await shared_store.list(SCOPE, origin="fax")
    assert bad.value.details["field"] == "origin"
    assert (await shared_store.get(SCOPE, job_id(1))).origin is JobOrigin.JOB
    # It finishes like a job, and is never claimed as one.
    done = await shared_store.succeed(SCOPE, job_id(2), response(job_id(2)), now=103)
    assert done.status is ImageJobStatus.SUCCEEDED and done.origin is JobOrigin.OPENAI
    assert await shared_store.claim(SCOPE, job_id(2), now=104) is False


async def test_one_key_names_one_record_and_another_request_conflicts(
    shared_store: SharedJobStore,
) -> None:
    first = await record(shared_store, 1, key="order-7")
    again = await record(shared_store, 2, key="order-7")
    assert first.created and not again.created
    assert again.job.id == job_id(1)
    with pytest.raises(BridgeError) as conflict:
        await record(shared_store, 3, key="order-7", fingerprint=OTHER_FINGERPRINT)
    assert conflict.value.code is ErrorCode.IDEMPOTENCY_CONFLICT
    # A job submitted with the same key is another thing, not a conflict.
    body = request("a job with that key")
    job = await shared_store.create(
        SCOPE, job_id(4), body, body["prompt"], submission_key="order-7",
        fingerprint=OTHER_FINGERPRINT, now=105, **ROOMY,
    )  # fmt: skip
    assert job.created
    # Another owner may use the key for its own record.
    assert (await record(shared_store, 5, key="order-7", scope="anonymous-local")).created


async def test_a_known_failure_forgets_its_key_and_an_unknown_one_keeps_it(
    shared_store: SharedJobStore,
) -> None:
    await record(shared_store, 1, key="k1")
    error = BridgeError(ErrorCode.CANCELLED, "left before the provider ran").to_dict()
    await shared_store.fail(SCOPE, job_id(1), "cancelled", error, now=110, forget_key=True)
    assert (await record(shared_store, 2, key="k1")).created  # runs again
    unknown = BridgeError(ErrorCode.TIMEOUT, "deadline").mark_unknown_outcome().to_dict()
    await shared_store.fail(SCOPE, job_id(2), "failed", unknown, now=111)
    again = await record(shared_store, 3, key="k1")
    assert not again.created and again.job.id == job_id(2)  # never a second call


async def test_find_retry_is_the_newest_record_of_the_owner_surface_and_request(
    shared_store: SharedJobStore,
) -> None:
    await record(shared_store, 1, now=100)
    await record(shared_store, 2, now=200)
    await record(shared_store, 3, now=300, origin=JobOrigin.STREAM)
    await record(shared_store, 4, now=400, fingerprint=OTHER_FINGERPRINT)
    await record(shared_store, 5, now=500, scope="anonymous-local")

    found = await shared_store.find_retry(SCOPE, "sync", FINGERPRINT, since=0)
    assert found is not None and found.id == job_id(2)
    assert await shared_store.find_retry(SCOPE, "sync", FINGERPRINT, since=201) is None
    stream = await shared_store.find_retry(SCOPE, "stream", FINGERPRINT, since=0)
    assert stream is not None and stream.id == job_id(3)
    assert await shared_store.find_retry(SCOPE, "openai", FINGERPRINT, since=0) is None


async def test_a_record_is_held_under_its_instances_lease(open_shared: OpenShared) -> None:
    here = await open_shared()
    elsewhere = await open_shared()
    await record(here, 1, now=1_000, lease=("inst-a", 10))
    renewed = await here.heartbeat("inst-a", [job_id(1)], now=1_005, lease_secs=10)
    assert renewed.renewed == {job_id(1)}
    assert await elsewhere.expire_leases(now=1_014) == 0
    assert await elsewhere.expire_leases(now=1_015) == 1  # its instance stopped renewing
    lost = await here.get(SCOPE, job_id(1))
    assert lost.status is ImageJobStatus.INTERRUPTED
    assert lost.error() is not None and lost.error()["details"]["recovery"]  # type: ignore[index]
    assert await here.instance_counts() == {}


async def test_cancelling_a_running_record_flags_it(shared_store: SharedJobStore) -> None:
    await record(shared_store, 1)
    flagged = await shared_store.request_cancel(SCOPE, job_id(1), now=120)
    assert flagged.status is ImageJobStatus.RUNNING and flagged.cancel_requested


async def test_a_single_instance_restart_records_running_records_interrupted(
    db_path: Path,
) -> None:
    async with await SqliteJobStore.open(db_path) as store:
        await store.open_record(
            SCOPE, job_id(1), request("x"), "x", origin="sync", fingerprint=FINGERPRINT, now=1
        )
        assert await store.recover_interrupted(now=2) == 1
        assert (await store.get(SCOPE, job_id(1))).status is ImageJobStatus.INTERRUPTED


# -- upgrades from the previous schema version -----------------------------------------------

_SQLITE_V3_TABLE = """
CREATE TABLE image_jobs (
    id TEXT PRIMARY KEY NOT NULL,
    auth_scope TEXT NOT NULL DEFAULT 'legacy-unowned',
    status TEXT NOT NULL CHECK (status IN
        ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    started_at INTEGER,
    completed_at INTEGER,
    progress_stage TEXT,
    partial_images INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    favorite INTEGER NOT NULL DEFAULT 0 CHECK (favorite IN (0, 1)),
    deleted_at INTEGER,
    submission_key_hash TEXT,
    request_fingerprint TEXT,
    logical_bytes INTEGER,
    prompt_search TEXT NOT NULL DEFAULT '',
    request_json TEXT NOT NULL,
    response_json TEXT,
    error_json TEXT
)
"""
"""The jobs table as schema version 3 made it (before synchronous records)."""


async def test_a_version_three_sqlite_database_gains_origins_in_place(tmp_path: Path) -> None:
    path = tmp_path / "v3.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute(_SQLITE_V3_TABLE)
    conn.execute(
        "CREATE TABLE job_schema_migrations (version INTEGER PRIMARY KEY NOT NULL, "
        "applied_at INTEGER NOT NULL)"
    )
    conn.executemany("INSERT INTO job_schema_migrations VALUES (?, 1)", [(1,), (2,), (3,)])
    conn.execute(
        "INSERT INTO image_jobs (id, auth_scope, status, created_at, updated_at, "
        "request_json, request_fingerprint) VALUES (?, ?, 'succeeded', 5, 6, ?, ?)",
        (job_id(1), SCOPE, '{"prompt": "old"}', FINGERPRINT),
    )
    conn.commit()
    conn.close()
    assert (await inspect_job_schema(path)).version == 3

    async with await SqliteJobStore.open(path) as store:
        assert (await inspect_job_schema(path)).version == 5
        old = await store.get(SCOPE, job_id(1))
        assert old.origin is JobOrigin.JOB and old.status is ImageJobStatus.SUCCEEDED
        assert await store.find_retry(SCOPE, "sync", FINGERPRINT, since=0) is None
        await store.open_record(
            SCOPE, job_id(2), request("new"), "new", origin="sync", fingerprint=FINGERPRINT, now=9
        )
        found = await store.find_retry(SCOPE, "sync", FINGERPRINT, since=0)
        assert found is not None and found.id == job_id(2)
        assert [i.id for i in (await store.list(SCOPE)).items] == [job_id(2), job_id(1)]


@pytest.mark.postgres
async def test_a_version_one_postgres_schema_gains_origins_in_place(
    postgres_url: str, postgres_schema: str
) -> None:
    from imagebridge.storage.lifecycle import JOB_STORE
    from imagebridge.storage.postgres.database import PostgresDatabase
    from imagebridge.storage.postgres.job_schema import JOB_SCHEMA
    from imagebridge.storage.postgres.jobs import inspect_job_schema as inspect_postgres
    from imagebridge.storage.rules.schema import StoreSchema

    old = StoreSchema(JOB_SCHEMA.recorded_as, JOB_SCHEMA.migrations[:1])
    database = await PostgresDatabase.open(
        postgres_url, schema=postgres_schema, store_schema=old, code=JOB_STORE.code, label="jobs"
    )
    table = database.table("image_jobs")

    async def insert(conn: Any) -> None:
        await conn.execute(
            f"INSERT INTO {table} (id, auth_scope, status, created_at, updated_at, "  # noqa: S608
            "request_json, request_fingerprint) VALUES (%s, %s, 'succeeded', 5, 6, %s, %s)",
            (job_id(1), SCOPE, '{"prompt": "old"}', FINGERPRINT),
        )

    await database.run(insert)
    await database.close()
    status = await inspect_postgres(postgres_url, schema=postgres_schema)
    assert status.version == 1

    store = await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)
    try:
        status = await inspect_postgres(postgres_url, schema=postgres_schema)
        assert (status.version, status.current) == (3, True)
        assert (await store.get(SCOPE, job_id(1))).origin is JobOrigin.JOB
        await store.open_record(
            SCOPE, job_id(2), request("new"), "new", origin="stream", fingerprint=FINGERPRINT,
            now=9,
        )  # fmt: skip
        found = await store.find_retry(SCOPE, "stream", FINGERPRINT, since=0)
        assert found is not None and found.id == job_id(2)
    finally:
        await store.close()
