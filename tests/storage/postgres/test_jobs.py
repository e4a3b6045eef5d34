"""PostgresSharedJobStore specifics: accounting after a workload, schema isolation, admission."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import (
    ACTIVE_ROW_RESERVE_BYTES,
    ROW_OVERHEAD_BYTES,
    JobRecord,
    PostgresSharedJobStore,
)

from ..conftest import SCOPE, job_id, request, response

pytestmark = pytest.mark.postgres


def expected_logical_bytes(job: JobRecord) -> int:
    """The original's logical-bytes formula, computed independently of the database."""

    def size(text: str | None) -> int:
        return 0 if text is None else len(text.encode("utf-8"))

    fixed = sum(
        size(text)
        for text in (
            job.id,
            job.auth_scope,
            job.request_json,
            job.prompt_search,
            job.submission_key_hash,
            job.request_fingerprint,
        )
    )
    tail = (
        ACTIVE_ROW_RESERVE_BYTES
        if not job.terminal
        else size(job.response_json) + size(job.error_json)
    )
    return fixed + tail + ROW_OVERHEAD_BYTES


async def test_logical_sizes_stay_exact_through_a_workload(
    pg_shared_job_store: PostgresSharedJobStore,
) -> None:
    store = pg_shared_job_store
    for n in range(40):
        body = request(f"prompt {n} ✓ ünïcødé", idempotency_key=f"k{n}")
        await store.create(
            SCOPE,
            job_id(n),
            body,
            body["prompt"],
            submission_key=f"k{n}" if n % 3 else None,
            fingerprint="e" * 64 if n % 3 else None,
            now=1_000 + n,
            max_pending=1_000,
            max_database_bytes=1 << 30,
        )
    for n in range(0, 40, 2):
        await store.claim(SCOPE, job_id(n), now=5_000)
    for n in range(0, 40, 4):
        await store.succeed(SCOPE, job_id(n), response(job_id(n), note="ß" * n), now=5_001)
    for n in range(2, 40, 4):
        await store.fail(SCOPE, job_id(n), "failed", {"code": "upstream", "message": "x"}, now=1)
    for n in range(1, 40, 4):
        await store.request_cancel(SCOPE, job_id(n), now=5_002)
    await store.update_history(SCOPE, job_id(0), favorite=True, deleted=True, now=5_003)
    await store.prune(now=5_004, retention_secs=10**6, max_retained=5, max_retained_bytes=1 << 30)

    stats = await store.statistics()
    jobs = []
    cursor = None
    while True:
        page = await store.list(SCOPE, visibility="all", cursor=cursor, limit=100)
        jobs.extend([await store.get(SCOPE, item.id) for item in page.items])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(jobs) == stats.total
    for job in jobs:
        assert job.logical_bytes == expected_logical_bytes(job), job.id
    assert sum(job.logical_bytes for job in jobs) == stats.logical_bytes
    assert stats.succeeded + stats.failed + stats.cancelled <= 6  # favourite + 5 retained
    assert stats.database_bytes > 0  # the table, its indexes and TOAST on disk


async def test_schemas_are_separate_deployments(
    pg_shared_job_store: PostgresSharedJobStore, postgres_url: str, postgres_schema: str
) -> None:
    async with await PostgresSharedJobStore.open(
        postgres_url, schema=postgres_schema + "_b"
    ) as other:
        body = request("only here")
        await pg_shared_job_store.create(
            SCOPE, job_id(1), body, "only here", now=1, max_pending=10, max_database_bytes=1 << 30
        )
        assert (await other.statistics()).total == 0
        assert (await other.list(SCOPE, visibility="all")).items == []
        assert other.schema == postgres_schema + "_b"


async def test_admission_holds_across_instances(postgres_url: str, postgres_schema: str) -> None:
    stores = [
        await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema) for _ in range(4)
    ]
    try:

        async def submit(store: PostgresSharedJobStore, n: int) -> Any:
            body = request(f"crowd {n}")
            try:
                return await store.create(
                    SCOPE,
                    job_id(n),
                    body,
                    body["prompt"],
                    now=n,
                    max_pending=5,
                    max_database_bytes=1 << 30,
                )
            except BridgeError as error:
                return error

        outcomes = await asyncio.gather(*(submit(stores[n % 4], n) for n in range(24)))
        refused = [o for o in outcomes if isinstance(o, BridgeError)]
        assert len(refused) == 19
        assert {(e.code, e.details["limit"]) for e in refused} == {
            (ErrorCode.OVERLOADED, "max_pending")
        }
        assert (await stores[0].statistics()).queued == 5
    finally:
        for store in stores:
            await store.close()


async def test_control_characters_in_prompts_are_stored_and_searchable(
    pg_shared_job_store: PostgresSharedJobStore,
) -> None:
    # PostgreSQL text cannot hold NUL: the search column maps it like SQLite's does, and
    # JSON escapes it in the stored request.
    prompt = "a\x00b\x01c ÉCLAIR\u2028"
    body = request(prompt)
    await pg_shared_job_store.create(
        SCOPE, job_id(1), body, prompt, now=1, max_pending=5, max_database_bytes=1 << 30
    )
    job = await pg_shared_job_store.get(SCOPE, job_id(1))
    assert job.request()["prompt"] == prompt
    for needle in ("b", "éclair", "ÉCLAIR"):
        page = await pg_shared_job_store.list(SCOPE, search=needle)
        assert [item.id for item in page.items] == [job_id(1)], needle
    assert (await pg_shared_job_store.list(SCOPE, search="a b")).items == []
