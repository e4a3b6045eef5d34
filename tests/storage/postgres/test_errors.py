"""psycopg's failures as BridgeError: the server's disk faults are named storage faults, a
database that is away is a retryable 503, the rest keep their status, and no error quotes row
data."""

from __future__ import annotations

import json

import psycopg
import pytest
from psycopg import errors as pg_errors

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import STORAGE_HEALTH
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.errors import translate_error
from imagebridge.storage.rules.schema import StoreSchema

LABEL = "durable job database"


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


@pytest.mark.postgres
async def test_database_errors_never_quote_row_data(
    postgres_url: str, postgres_schema: str
) -> None:
    schema = StoreSchema(recorded_as="demo", migrations=())
    db = await PostgresDatabase.open(
        postgres_url,
        schema=postgres_schema,
        store_schema=schema,
        code=ErrorCode.INTERNAL,
        label="demo db",
    )
    try:
        await db.run(
            lambda conn: conn.execute(
                f"CREATE TABLE {db.table('items')} (value text CHECK (value <> 'secret prompt'))"
            )
        )
        with pytest.raises(BridgeError) as caught:
            await db.run(
                lambda conn: conn.execute(
                    f"INSERT INTO {db.table('items')} VALUES ('secret prompt')"  # noqa: S608
                )
            )
        assert caught.value.message == "demo db rejected an inconsistent write"
        assert caught.value.details["sqlstate"] == "23514"
        assert "secret prompt" not in json.dumps(caught.value.to_dict())
        with pytest.raises(BridgeError) as missing:
            await db.run(lambda conn: conn.execute("SELECT * FROM no_such_table"))
        assert missing.value.message == "demo db operation failed"
        assert missing.value.details["sqlstate"] == "42P01"
    finally:
        await db.close()
