"""PostgresDatabase: closed means closed, a cancelled caller never leaves a half-done write, lock
waits are bounded."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from imagebridge.contract.errors import BridgeError
from imagebridge.storage import (
    PostgresSharedJobStore,
)
from imagebridge.storage.postgres.queries import advisory_key

from ..conftest import SCOPE, job_id
from .conftest import submit

pytestmark = pytest.mark.postgres


async def test_a_closed_store_refuses_calls(pg_shared_job_store: PostgresSharedJobStore) -> None:
    assert await pg_shared_job_store.healthy()
    await pg_shared_job_store.close()
    await pg_shared_job_store.close()  # idempotent
    assert not await pg_shared_job_store.healthy()
    with pytest.raises(BridgeError) as caught:
        await pg_shared_job_store.get(SCOPE, job_id(1))
    assert caught.value.message == "durable job database is closed"
    with pytest.raises(BridgeError):
        async with pg_shared_job_store.subscribe():
            pass


async def test_a_cancelled_caller_never_leaves_a_half_done_write(
    pg_shared_job_store: PostgresSharedJobStore, postgres_url: str, postgres_schema: str
) -> None:
    key = advisory_key(postgres_schema, "jobs:admission")
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as blocker:
        await blocker.execute("SELECT pg_advisory_lock(%s)", (key,))
        task = asyncio.create_task(submit(pg_shared_job_store, 1))
        await asyncio.sleep(0.2)  # the submission now waits for the admission lock
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await blocker.execute("SELECT pg_advisory_unlock(%s)", (key,))
    await pg_shared_job_store.close()  # waits for the call still in flight
    async with await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema) as reopened:
        job = await reopened.get(SCOPE, job_id(1))
        assert job.request()["prompt"] == "a red fox"


async def test_lock_waits_are_bounded_and_retryable(
    postgres_url: str, postgres_schema: str
) -> None:
    store = await PostgresSharedJobStore.open(
        postgres_url, schema=postgres_schema, busy_timeout_ms=50
    )
    key = advisory_key(postgres_schema, "jobs:admission")
    try:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as other:
            await other.execute("SELECT pg_advisory_lock(%s)", (key,))
            with pytest.raises(BridgeError) as caught:
                await submit(store, 1)
        assert (caught.value.message, caught.value.retryable) == (
            "durable job database is busy",
            True,
        )
        assert caught.value.details["sqlstate"] == "55P03"  # lock_not_available
        assert (await submit(store, 1)).created
    finally:
        await store.close()
