"""PostgreSQL's own faults on the real server: a write clears the database's disk fault, and a
connection lost with the COMMIT in flight is never called safe to send again (the mapping of
each psycopg error is in ``test_errors.py``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import STORAGE_HEALTH
from imagebridge.storage import (
    PostgresSharedJobStore,
)
from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.queries import fetch_value
from imagebridge.storage.rules.schema import StoreSchema
from tests.support.postgres import PostgresServer

from ..conftest import SCOPE
from .conftest import submit


@pytest.fixture
async def database(postgres_url: str, postgres_schema: str) -> AsyncIterator[PostgresDatabase]:
    db = await PostgresDatabase.open(
        postgres_url,
        schema=postgres_schema,
        store_schema=StoreSchema(recorded_as="faults", migrations=()),
        code=ErrorCode.INTERNAL,
        label="demo db",
    )
    await db.run(lambda conn: conn.execute(f"CREATE TABLE {db.table('items')} (value int)"))
    try:
        yield db
    finally:
        await db.close()


@pytest.mark.postgres
async def test_a_write_clears_the_databases_disk_fault_and_a_read_does_not(
    postgres_url: str, postgres_schema: str
) -> None:
    store = await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)
    try:
        STORAGE_HEALTH.failed("database", "no_space")
        await store.list(SCOPE)  # a read proves nothing about space
        assert STORAGE_HEALTH.reasons() == {"database": "no_space"}
        assert (await submit(store, 1)).created
        assert not STORAGE_HEALTH.degraded
    finally:
        await store.close()


def _terminate_and_wait(admin_url: str, pid: int) -> None:
    """End backend ``pid`` and wait (bounded) until it has gone."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 30
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline, "the backend did not end"
            time.sleep(0.05)


@pytest.mark.postgres
async def test_a_connection_lost_at_commit_is_not_called_safe_to_send_again(
    database: PostgresDatabase, postgres_server: PostgresServer
) -> None:
    async def insert_then_lose_the_connection(conn: Connection) -> Any:
        await conn.execute(f"INSERT INTO {database.table('items')} VALUES (1)")  # noqa: S608
        pid = await fetch_value(conn, "SELECT pg_backend_pid()")
        _terminate_and_wait(postgres_server.admin_url(), int(pid))

    with pytest.raises(BridgeError) as caught:
        await database.run(insert_then_lose_the_connection)
    error = caught.value
    assert error.details["storage"] == "database"
    assert error.details["commit"] == "unknown"
    assert error.retryable  # the store's own retries (outcome writes) recognise it
    assert error.http_status == 500  # but a caller is not told to send it again


@pytest.mark.postgres
async def test_a_connection_lost_before_the_commit_is_a_retryable_503(
    database: PostgresDatabase, postgres_server: PostgresServer
) -> None:
    async def lose_the_connection_then_write(conn: Connection) -> Any:
        pid = await fetch_value(conn, "SELECT pg_backend_pid()")
        _terminate_and_wait(postgres_server.admin_url(), int(pid))
        await conn.execute(f"INSERT INTO {database.table('items')} VALUES (1)")  # noqa: S608

    with pytest.raises(BridgeError) as caught:
        await database.run(lose_the_connection_then_write)
    error = caught.value
    assert error.details["storage"] == "database" and "commit" not in error.details
    assert error.http_status == 503
    count = await database.run(
        lambda conn: fetch_value(conn, f"SELECT count(*) FROM {database.table('items')}")  # noqa: S608
    )
    assert count == 0
