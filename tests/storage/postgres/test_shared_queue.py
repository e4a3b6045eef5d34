"""The PostgreSQL shared queue's notifications: LISTEN/NOTIFY within one schema."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from imagebridge.contract.errors import BridgeError
from imagebridge.storage import (
    JobEvent,
    JobEventKind,
    PostgresSharedJobStore,
)
from tests.support.postgres import PostgresServer

from ..conftest import job_id
from .conftest import sql

pytestmark = pytest.mark.postgres


@pytest.fixture
async def other_schema_store(postgres_url: str) -> AsyncIterator[PostgresSharedJobStore]:
    store = await PostgresSharedJobStore.open(postgres_url, schema="t_other_deployment")
    try:
        yield store
    finally:
        await store.close()


async def test_notifications_stay_within_their_schema(
    pg_shared_job_store: PostgresSharedJobStore, other_schema_store: PostgresSharedJobStore
) -> None:
    async with pg_shared_job_store.subscribe() as events:
        await other_schema_store.notify_job_event(JobEventKind.QUEUED, job_id(1))
        await pg_shared_job_store.notify_job_event(JobEventKind.QUEUED, job_id(2))
        async with asyncio.timeout(10):
            assert await anext(events) == JobEvent(JobEventKind.QUEUED, job_id(2))


async def test_foreign_payloads_on_the_channel_are_skipped(
    pg_shared_job_store: PostgresSharedJobStore, postgres_url: str, postgres_schema: str
) -> None:
    channel = f"{postgres_schema}_job_events"
    async with pg_shared_job_store.subscribe() as events:
        sql(postgres_url, "SELECT pg_notify(%s, %s)", (channel, "not ours"))
        await pg_shared_job_store.notify_job_event(JobEventKind.FINISHED, job_id(3))
        async with asyncio.timeout(10):
            assert await anext(events) == JobEvent(JobEventKind.FINISHED, job_id(3))


async def test_a_lost_listener_connection_is_a_retryable_error(
    pg_shared_job_store: PostgresSharedJobStore,
    postgres_server: PostgresServer,
    postgres_schema: str,
) -> None:
    async with pg_shared_job_store.subscribe() as events:
        killed = sql(
            postgres_server.admin_url(),
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s",
            (f'LISTEN "{postgres_schema}_job_events"',),
        )
        assert killed == [(True,)]
        with pytest.raises(BridgeError) as caught:
            async with asyncio.timeout(10):
                await anext(events)
        assert caught.value.retryable
        assert caught.value.message == "durable job database is unavailable"
    # The pool is separate: the store keeps working, and a new subscription works.
    async with pg_shared_job_store.subscribe() as again:
        await pg_shared_job_store.notify_job_event(JobEventKind.QUEUED, job_id(4))
        async with asyncio.timeout(10):
            assert await anext(again) == JobEvent(JobEventKind.QUEUED, job_id(4))
