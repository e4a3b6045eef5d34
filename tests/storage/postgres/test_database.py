"""PostgresDatabase: migrations, concurrent startup, privileges, errors, cancellation, LISTEN."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import (
    JobEvent,
    JobEventKind,
    PostgresJobStore,
    PostgresPresetStore,
    PostgresSessionStore,
    inspect_postgres_job_schema,
)
from imagebridge.storage.postgres.database import PgSchema, PostgresDatabase, advisory_key
from tests.support.postgres import PostgresServer

from ..conftest import SCOPE, job_id, request

pytestmark = pytest.mark.postgres

ROOMY: dict[str, Any] = {"max_pending": 1_000, "max_database_bytes": 1 << 30}


def sql(url: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """One statement on its own autocommit connection (test set-up and inspection)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def schema_exists(url: str, schema: str) -> bool:
    return bool(sql(url, "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)))


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens once the probe closes


@pytest.fixture
def limited_role(postgres_server: PostgresServer) -> Iterator[str]:
    """A login role with no privileges at all until a test grants some."""
    admin = postgres_server.admin_url()
    sql(admin, "CREATE ROLE limited_bridge LOGIN PASSWORD 'limited-pw'")
    try:
        yield postgres_server.url(user="limited_bridge", password="limited-pw")
    finally:
        sql(admin, "DROP OWNED BY limited_bridge")
        sql(admin, "DROP ROLE limited_bridge")


async def submit(store: PostgresJobStore, n: int, prompt: str = "a red fox") -> Any:
    return await store.create(SCOPE, job_id(n), request(prompt), prompt, now=100 + n, **ROOMY)


# -- migrations --------------------------------------------------------------------------------


async def test_many_bridges_can_create_one_fresh_schema_at_once(
    postgres_url: str, postgres_schema: str
) -> None:
    assert not schema_exists(postgres_url, postgres_schema)
    opened: list[PostgresJobStore | PostgresPresetStore | PostgresSessionStore] = []
    opened += await asyncio.gather(
        *(PostgresJobStore.open(postgres_url, schema=postgres_schema) for _ in range(5)),
        *(PostgresPresetStore.open(postgres_url, schema=postgres_schema) for _ in range(3)),
        *(
            PostgresSessionStore.open(postgres_url, provider="p", schema=postgres_schema)
            for _ in range(3)
        ),
    )
    try:
        jobs = opened[0]
        assert isinstance(jobs, PostgresJobStore)
        assert await jobs.healthy()
    finally:
        for store in opened:
            await store.close()
    rows = sql(
        postgres_url,
        f"SELECT component, version FROM {postgres_schema}.schema_migrations "  # noqa: S608
        "ORDER BY component",
    )
    assert rows == [("jobs", 1), ("presets", 1), ("presets", 2), ("sessions", 1)]


async def test_inspection_is_read_only(postgres_url: str, postgres_schema: str) -> None:
    status = await inspect_postgres_job_schema(postgres_url, schema=postgres_schema)
    assert status.to_dict() == {"initialized": False, "version": None, "current_version": 1}
    assert not schema_exists(postgres_url, postgres_schema)
    await (await PostgresJobStore.open(postgres_url, schema=postgres_schema)).close()
    status = await inspect_postgres_job_schema(postgres_url, schema=postgres_schema)
    assert (status.initialized, status.version, status.current) == (True, 1, True)


async def test_newer_schema_is_refused_untouched(postgres_url: str, postgres_schema: str) -> None:
    await (await PostgresJobStore.open(postgres_url, schema=postgres_schema)).close()
    sql(
        postgres_url,
        f"INSERT INTO {postgres_schema}.schema_migrations VALUES ('jobs', 9, 1)",  # noqa: S608
    )
    with pytest.raises(BridgeError) as caught:
        await PostgresJobStore.open(postgres_url, schema=postgres_schema)
    assert caught.value.code is ErrorCode.INTERNAL
    assert caught.value.message == (
        "durable job database schema version 9 is newer than this bridge supports"
    )
    assert caught.value.details["current_version"] == 1
    status = await inspect_postgres_job_schema(postgres_url, schema=postgres_schema)
    assert (status.version, status.current) == (9, False)
    # Other components in the same schema are not affected.
    await (await PostgresPresetStore.open(postgres_url, schema=postgres_schema)).close()


async def test_a_dropped_index_is_recreated_on_open(
    postgres_url: str, postgres_schema: str
) -> None:
    await (await PostgresJobStore.open(postgres_url, schema=postgres_schema)).close()
    sql(postgres_url, f"DROP INDEX {postgres_schema}.image_jobs_submission_idx")
    async with await PostgresJobStore.open(postgres_url, schema=postgres_schema) as store:
        body = request("twice", idempotency_key="k")
        for n in (1, 2):
            await store.create(
                SCOPE,
                job_id(n),
                body,
                "twice",
                submission_key="k",
                fingerprint="a" * 64,
                now=1,
                **ROOMY,
            )
    indexes = sql(
        postgres_url,
        "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
        (postgres_schema, "image_jobs_submission_idx"),
    )
    assert len(indexes) == 1
    assert indexes[0][0].startswith("CREATE UNIQUE INDEX")


async def test_a_foreign_table_of_the_same_name_is_refused(
    postgres_url: str, postgres_schema: str
) -> None:
    sql(postgres_url, f"CREATE SCHEMA {postgres_schema}")
    sql(postgres_url, f"CREATE TABLE {postgres_schema}.image_jobs (id text, status text)")
    with pytest.raises(BridgeError) as caught:
        await PostgresJobStore.open(postgres_url, schema=postgres_schema)
    assert caught.value.message == "durable job database has an unrecognised image_jobs table"
    assert "request_json" in caught.value.details["missing_columns"]
    # Nothing was recorded: the migration rolled back as a whole.
    status = await inspect_postgres_job_schema(postgres_url, schema=postgres_schema)
    assert not status.initialized


async def test_a_role_without_create_privileges_uses_prepared_tables(
    postgres_url: str, postgres_schema: str, limited_role: str
) -> None:
    with pytest.raises(BridgeError) as cannot_create:
        await PostgresJobStore.open(limited_role, schema=postgres_schema)
    assert cannot_create.value.code is ErrorCode.INTERNAL
    assert cannot_create.value.details["sqlstate"] == "42501"  # insufficient_privilege

    # An administrator (here: the owner) creates the tables and grants plain DML.
    await (await PostgresJobStore.open(postgres_url, schema=postgres_schema)).close()
    sql(postgres_url, f"GRANT USAGE ON SCHEMA {postgres_schema} TO limited_bridge")
    sql(
        postgres_url,
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
        f"{postgres_schema} TO limited_bridge",
    )
    async with await PostgresJobStore.open(limited_role, schema=postgres_schema) as store:
        assert (await submit(store, 1)).created
        assert (await store.statistics()).total == 1


async def test_non_utf8_databases_are_refused(postgres_server: PostgresServer) -> None:
    admin = postgres_server.admin_url()
    sql(
        admin,
        "CREATE DATABASE ascii_db ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' "
        "TEMPLATE template0 OWNER bridge",
    )
    try:
        with pytest.raises(BridgeError) as caught:
            await PostgresJobStore.open(postgres_server.url(database="ascii_db"))
        assert caught.value.message == "durable job database must use UTF8 encoding"
        assert caught.value.details == {"server_encoding": "SQL_ASCII"}
    finally:
        sql(admin, "DROP DATABASE ascii_db")


# -- connection errors never show the password ---------------------------------------------------


def assert_secret_hidden(error: BridgeError, secret: str) -> None:
    shown = json.dumps(error.to_dict()) + str(error) + repr(error)
    assert secret not in shown


async def test_unreachable_server_is_a_retryable_error(closed_port: int) -> None:
    secret = "s3cret-unreachable"
    url = f"postgresql://bridge:{secret}@127.0.0.1:{closed_port}/db"
    with pytest.raises(BridgeError) as caught:
        await PostgresJobStore.open(url, connect_timeout_s=5)
    assert (caught.value.code, caught.value.message) == (
        ErrorCode.INTERNAL,
        "durable job database is unavailable",
    )
    assert caught.value.retryable
    assert_secret_hidden(caught.value, secret)


async def test_refused_logins_say_why_without_the_password(
    postgres_server: PostgresServer,
) -> None:
    wrong = "wrong-password-123"
    for url, why in (
        (postgres_server.url(password=wrong), "password authentication failed"),
        (postgres_server.url(database="no_such_database"), "does not exist"),
    ):
        with pytest.raises(BridgeError) as caught:
            await PostgresPresetStore.open(url)
        assert caught.value.message == "preset database is unavailable"
        assert why in caught.value.details["reason"]
        assert_secret_hidden(caught.value, wrong)
        assert_secret_hidden(caught.value, postgres_server.password)


async def test_malformed_urls_and_options_are_refused() -> None:
    secret = "pw in a bad url"  # libpq's own message would quote it
    malformed = "durable job database URL is malformed"
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("mysql://u@h/db", {}, "durable job database URL must start with postgresql://"),
        (f"postgresql://u:{secret}@h/db", {}, malformed),
        (f"postgresql://u:{secret.replace(' ', '-')}@h/db?bogus_option=1", {}, malformed),
        ("postgresql://h/db", {"schema": "Bad-Name"}, "PostgreSQL schema names are"),
        ("postgresql://h/db", {"schema": "pg_catalog"}, "PostgreSQL schema names are"),
        ("postgresql://h/db", {"schema": "x" * 49}, "PostgreSQL schema names are"),
        ("postgresql://h/db", {"pool_min_size": 3, "pool_max_size": 2}, "pool_min_size must"),
        ("postgresql://h/db", {"pool_max_size": 0}, "pool_max_size must be between"),
        ("postgresql://h/db", {"connect_timeout_s": 0}, "connect_timeout_s must be between"),
        ("postgresql://h/db", {"busy_timeout_ms": -1}, "busy_timeout_ms must be between"),
        ("postgresql://h/db", {"max_result_bytes": -1}, "max_result_bytes must be"),
    ]
    for url, options, message in cases:
        with pytest.raises(BridgeError) as caught:
            await PostgresJobStore.open(url, **options)
        assert caught.value.code is ErrorCode.INTERNAL
        assert caught.value.message.startswith(message), caught.value.message
        assert_secret_hidden(caught.value, secret)
        assert_secret_hidden(caught.value, secret.replace(" ", "-"))


# -- calls -------------------------------------------------------------------------------------


async def test_a_closed_store_refuses_calls(pg_job_store: PostgresJobStore) -> None:
    assert await pg_job_store.healthy()
    await pg_job_store.close()
    await pg_job_store.close()  # idempotent
    assert not await pg_job_store.healthy()
    with pytest.raises(BridgeError) as caught:
        await pg_job_store.get(SCOPE, job_id(1))
    assert caught.value.message == "durable job database is closed"
    with pytest.raises(BridgeError):
        async with pg_job_store.subscribe():
            pass


async def test_a_cancelled_caller_never_leaves_a_half_done_write(
    pg_job_store: PostgresJobStore, postgres_url: str, postgres_schema: str
) -> None:
    key = advisory_key(postgres_schema, "jobs:admission")
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as blocker:
        await blocker.execute("SELECT pg_advisory_lock(%s)", (key,))
        task = asyncio.create_task(submit(pg_job_store, 1))
        await asyncio.sleep(0.2)  # the submission now waits for the admission lock
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await blocker.execute("SELECT pg_advisory_unlock(%s)", (key,))
    await pg_job_store.close()  # waits for the call still in flight
    async with await PostgresJobStore.open(postgres_url, schema=postgres_schema) as reopened:
        job = await reopened.get(SCOPE, job_id(1))
        assert job.request()["prompt"] == "a red fox"


async def test_lock_waits_are_bounded_and_retryable(
    postgres_url: str, postgres_schema: str
) -> None:
    store = await PostgresJobStore.open(postgres_url, schema=postgres_schema, busy_timeout_ms=50)
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


async def test_database_errors_never_quote_row_data(
    postgres_url: str, postgres_schema: str
) -> None:
    schema = PgSchema(component="demo", migrations=())
    db = await PostgresDatabase.open(
        postgres_url,
        schema=postgres_schema,
        pg_schema=schema,
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


# -- LISTEN/NOTIFY -----------------------------------------------------------------------------


@pytest.fixture
async def other_schema_store(postgres_url: str) -> AsyncIterator[PostgresJobStore]:
    store = await PostgresJobStore.open(postgres_url, schema="t_other_deployment")
    try:
        yield store
    finally:
        await store.close()


async def test_notifications_stay_within_their_schema(
    pg_job_store: PostgresJobStore, other_schema_store: PostgresJobStore
) -> None:
    async with pg_job_store.subscribe() as events:
        await other_schema_store.notify_job_event(JobEventKind.QUEUED, job_id(1))
        await pg_job_store.notify_job_event(JobEventKind.QUEUED, job_id(2))
        async with asyncio.timeout(10):
            assert await anext(events) == JobEvent(JobEventKind.QUEUED, job_id(2))


async def test_foreign_payloads_on_the_channel_are_skipped(
    pg_job_store: PostgresJobStore, postgres_url: str, postgres_schema: str
) -> None:
    channel = f"{postgres_schema}_job_events"
    async with pg_job_store.subscribe() as events:
        sql(postgres_url, "SELECT pg_notify(%s, %s)", (channel, "not ours"))
        await pg_job_store.notify_job_event(JobEventKind.FINISHED, job_id(3))
        async with asyncio.timeout(10):
            assert await anext(events) == JobEvent(JobEventKind.FINISHED, job_id(3))


async def test_a_lost_listener_connection_is_a_retryable_error(
    pg_job_store: PostgresJobStore, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    async with pg_job_store.subscribe() as events:
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
    async with pg_job_store.subscribe() as again:
        await pg_job_store.notify_job_event(JobEventKind.QUEUED, job_id(4))
        async with asyncio.timeout(10):
            assert await anext(again) == JobEvent(JobEventKind.QUEUED, job_id(4))
