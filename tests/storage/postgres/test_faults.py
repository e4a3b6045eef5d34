"""PostgreSQL's own faults answer like SQLite's: a full disk or an I/O error of the database
server is a named storage fault (``details.reason``, ``details.storage: "database"``, 503 and
recorded in the storage health), a database that is away is a retryable 503, and a
connection lost with the COMMIT in flight is never called safe to send again."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import STORAGE_HEALTH
from imagebridge.storage import PostgresJobStore
from imagebridge.storage.postgres.database import (
    Connection,
    PgSchema,
    PostgresDatabase,
    fetch_value,
    translate_error,
)
from tests.support.postgres import PostgresServer

from ..conftest import SCOPE
from .test_database import submit

LABEL = "durable job database"


@pytest.fixture(autouse=True)
def clean_health() -> Iterator[None]:
    STORAGE_HEALTH.reset()
    yield
    STORAGE_HEALTH.reset()


# -- the mapping of psycopg's errors (no server needed) ----------------------------------------


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (pg_errors.DiskFull('could not extend file "base/16384/16385": No space left'), "no_space"),
        (pg_errors.IoError("could not read block 0 in file"), "io_error"),
    ],
)
def test_the_servers_disk_faults_are_named_storage_faults(exc: Exception, reason: str) -> None:
    error = translate_error(exc, ErrorCode.SESSION, "session database")
    # Whatever the store's own code, like SQLite's SQLITE_FULL / SQLITE_IOERR.
    assert error.code is ErrorCode.INTERNAL
    assert error.retryable
    assert error.details["reason"] == reason
    assert error.details["storage"] == "database"
    assert error.details["sqlstate"] == exc.sqlstate  # type: ignore[attr-defined]
    assert error.http_status == 503
    assert STORAGE_HEALTH.reasons() == {"database": reason}


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.OperationalError("connection failed: Connection refused"),
        pg_errors.AdminShutdown("terminating connection due to administrator command"),
        pg_errors.TooManyConnections("sorry, too many clients already"),
        pg_errors.OutOfMemory("out of memory"),
    ],
)
def test_a_database_that_is_away_or_short_of_resources_is_a_retryable_503(
    exc: Exception,
) -> None:
    error = translate_error(exc, ErrorCode.SESSION, "session database")
    assert error.retryable
    assert error.details["storage"] == "database"
    assert error.http_status == 503
    # Not a disk fault: the storage health is readiness's business, not the disk's.
    assert not STORAGE_HEALTH.degraded


def test_other_database_errors_keep_their_status() -> None:
    refused = translate_error(
        pg_errors.CheckViolation("new row violates check constraint"), ErrorCode.INTERNAL, LABEL
    )
    assert not refused.retryable and refused.http_status == 500
    busy = translate_error(pg_errors.LockNotAvailable("lock timeout"), ErrorCode.INTERNAL, LABEL)
    assert busy.retryable and "storage" not in busy.details and busy.http_status == 500


# -- on the real server ------------------------------------------------------------------------


@pytest.fixture
async def database(postgres_url: str, postgres_schema: str) -> AsyncIterator[PostgresDatabase]:
    db = await PostgresDatabase.open(
        postgres_url,
        schema=postgres_schema,
        pg_schema=PgSchema(component="faults", migrations=()),
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
    store = await PostgresJobStore.open(postgres_url, schema=postgres_schema)
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
