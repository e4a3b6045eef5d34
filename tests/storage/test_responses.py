"""Kept OpenAI responses on both backends: the rows, their owner rule, the one response per
history record, deletion, the upgrade that adds the table, and the ``response.*`` event a
background response's job writes with its final status (instead of ``job.*``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import (
    PostgresOptions,
    PostgresSharedJobStore,
    PostgresWebhookStore,
    ResponseRecord,
    ResponseStore,
    SharedJobStore,
    SqliteJobStore,
    SqliteSharedJobStore,
    SqliteWebhookStore,
    WebhookStore,
    attach_outbox,
    open_response_store,
)
from imagebridge.storage.rules.webhooks import OutboxLimits
from imagebridge.storage.sqlite.jobs import inspect_job_schema
from imagebridge.storage.webhook_store import EndpointWrite

from .conftest import ROOMY, SCOPE, job_id, request, response

LIMITS = OutboxLimits(retry_period_ms=60_000, max_pending=1_000)
NOW_MS = 4_000_000_000_000
OTHER = "key:key_0123456789abcdef"


@dataclass
class Database:
    jobs: SharedJobStore
    responses: ResponseStore
    webhooks: WebhookStore


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    jobs: SharedJobStore
    webhooks: WebhookStore
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        schema = request.getfixturevalue("postgres_schema")
        jobs = await PostgresSharedJobStore.open(url, schema=schema)
        webhooks = await PostgresWebhookStore.open(url, schema=schema)
        from imagebridge.storage.postgres.responses import PostgresResponseStore

        responses: ResponseStore = await PostgresResponseStore.open(url, schema=schema)
    else:
        path = tmp_path / "jobs.sqlite3"
        jobs = await SqliteSharedJobStore.open(path)
        webhooks = await SqliteWebhookStore.open(path)
        responses = await open_response_store(path)
    attach_outbox(jobs, webhooks, LIMITS)
    try:
        yield Database(jobs, responses, webhooks)
    finally:
        await responses.close()
        await webhooks.close()
        await jobs.close()


def kept(n: int, *, job: str, scope: str = SCOPE, background: bool = True) -> ResponseRecord:
    return ResponseRecord(
        id=f"resp_{n}",
        auth_scope=scope,
        job_id=job,
        call_id=f"ig_{n}",
        message_id=f"msg_{n}",
        background=background,
        created_at=100 + n,
        shape_json='{"echo": {}}',
    )


async def test_rows_are_owned_one_per_record_and_deleted_for_good(db: Database) -> None:
    store = db.responses
    saved = await store.save(kept(1, job=job_id(1)))
    assert saved == kept(1, job=job_id(1))
    # A second response for the same record (a joined retry) gets the first one.
    assert (await store.save(kept(2, job=job_id(1)))).id == "resp_1"
    assert await store.get(SCOPE, "resp_2") is None
    assert await store.get(OTHER, "resp_1") is None
    assert await store.by_call(SCOPE, "ig_1") == saved
    assert await store.by_call(OTHER, "ig_1") is None
    assert await store.by_job(job_id(1)) == saved
    assert not await store.delete(OTHER, "resp_1", now=200)
    assert await store.delete(SCOPE, "resp_1", now=200)
    assert not await store.delete(SCOPE, "resp_1", now=201)
    assert await store.get(SCOPE, "resp_1") is None
    assert await store.by_call(SCOPE, "ig_1") is None
    await store.save(kept(3, job=job_id(3), background=False))
    found = await store.get(SCOPE, "resp_3")
    assert found is not None and found.background is False
    await store.forget("resp_3")
    assert await store.get(SCOPE, "resp_3") is None


def _endpoint() -> EndpointWrite:
    types = ("response.completed", "response.failed", "response.cancelled", "job.succeeded")
    return EndpointWrite(
        name="ci",
        url="https://ci.example/hook",
        event_types=types,
        key_id=None,
        secret="whsec_" + "A" * 43 + "=",
        secret_env=None,
        secret_hint="whsec_…AAA=",
    )


async def _running(jobs: SharedJobStore, n: int) -> str:
    body = request(f"job {n}")
    await jobs.create(SCOPE, job_id(n), body, body["prompt"], now=10 + n, **ROOMY)
    assert await jobs.claim(SCOPE, job_id(n), now=20 + n)
    return job_id(n)


async def test_a_background_responses_job_writes_its_response_event(db: Database) -> None:
    assert await db.webhooks.create_endpoint(_endpoint(), now=1, max_endpoints=10) is not None
    for n in (1, 2, 3, 4):
        await db.responses.save(kept(n, job=job_id(n)))
    await db.jobs.succeed(SCOPE, await _running(db.jobs, 1), response(job_id(1)), now=100)
    error = BridgeError(ErrorCode.UPSTREAM, "upstream broke").to_dict()
    await db.jobs.fail(SCOPE, await _running(db.jobs, 2), ImageJobStatus.FAILED, error, now=101)
    body = request("queued")
    await db.jobs.create(SCOPE, job_id(3), body, body["prompt"], now=30, **ROOMY)
    await db.jobs.request_cancel(SCOPE, job_id(3), now=102)
    await _running(db.jobs, 4)
    assert await db.jobs.recover_interrupted(now=103) == 1
    await db.jobs.succeed(SCOPE, await _running(db.jobs, 5), response(job_id(5)), now=104)

    targets = await db.webhooks.claim("reader", limit=100, now_ms=NOW_MS, lease_ms=1_000)
    events = sorted((json.loads(t.payload) for t in targets), key=lambda e: e["created_at"])
    assert [(e["type"], e["data"]) for e in events] == [
        ("response.completed", {"id": "resp_1"}),
        ("response.failed", {"id": "resp_2"}),
        ("response.cancelled", {"id": "resp_3"}),
        ("response.failed", {"id": "resp_4"}),  # interrupted at a restart: failed
        ("job.succeeded", {"id": job_id(5), "status": "succeeded", "error_code": None}),
    ]
    for event in events:
        assert set(event) == {"id", "object", "created_at", "type", "data"}


async def test_a_version_four_file_gains_the_responses_table_keeping_its_jobs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v4.sqlite3"
    store = await SqliteJobStore.open(path)
    body = request("kept fox")
    await store.create(SCOPE, job_id(1), body, body["prompt"], now=10, **ROOMY)
    await store.close()
    conn = sqlite3.connect(path)  # back to version 4: no responses table, no marker
    conn.execute("DROP TABLE openai_responses")
    conn.execute("DELETE FROM job_schema_migrations WHERE version = 5")
    conn.commit()
    conn.close()
    assert (await inspect_job_schema(path)).version == 4

    responses = await open_response_store(path)
    try:
        assert (await inspect_job_schema(path)).version == 5
        await responses.save(kept(1, job=job_id(1)))
        assert await responses.get(SCOPE, "resp_1") is not None
    finally:
        await responses.close()
    store = await SqliteJobStore.open(path)
    try:
        assert (await store.get(SCOPE, job_id(1))).request()["prompt"] == "kept fox"
    finally:
        await store.close()


@pytest.mark.postgres
async def test_a_version_two_schema_gains_the_responses_table(
    postgres_url: str, postgres_schema: str
) -> None:
    from .postgres.conftest import sql

    store = await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)
    body = request("kept fox")
    await store.create(SCOPE, job_id(1), body, body["prompt"], now=10, **ROOMY)
    await store.close()
    sql(postgres_url, f"DROP TABLE {postgres_schema}.openai_responses")
    sql(
        postgres_url,
        f"DELETE FROM {postgres_schema}.schema_migrations "  # noqa: S608
        "WHERE component = 'jobs' AND version = 3",
    )
    responses = await open_response_store(
        postgres_url, postgres=PostgresOptions(schema=postgres_schema)
    )
    try:
        await responses.save(kept(1, job=job_id(1)))
        assert await responses.get(SCOPE, "resp_1") is not None
    finally:
        await responses.close()
    rows = sql(
        postgres_url,
        f"SELECT version FROM {postgres_schema}.schema_migrations "  # noqa: S608
        "WHERE component = 'jobs' ORDER BY version",
    )
    assert rows == [(1,), (2,), (3,)]
    store = await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)
    try:
        assert (await store.get(SCOPE, job_id(1))).request()["prompt"] == "kept fox"
    finally:
        await store.close()


async def test_a_kept_response_is_pruned_with_its_record(db: Database) -> None:
    for n in (1, 2, 3):
        await db.responses.save(kept(n, job=job_id(n)))
        await db.jobs.succeed(SCOPE, await _running(db.jobs, n), response(job_id(n)), now=100 + n)
    # job 1 expires by age; of the other two only the newest is retained
    removed = await db.jobs.prune(
        now=1_000, retention_secs=899, max_retained=1, max_retained_bytes=10**9
    )
    assert removed == 2
    assert [await db.responses.by_job(job_id(n)) is None for n in (1, 2, 3)] == [
        True,
        True,
        False,
    ]
