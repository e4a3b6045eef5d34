"""PostgreSQL migrations: many bridges at once, a newer schema refused, self-repair, foreign
tables, and a role that may not create anything."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import (
    PostgresPresetStore,
    PostgresSessionStore,
    PostgresSharedJobStore,
)
from imagebridge.storage.postgres.jobs import inspect_job_schema

from ..conftest import SCOPE, job_id, request
from .conftest import schema_exists, sql, submit

pytestmark = pytest.mark.postgres

ROOMY: dict[str, Any] = {"max_pending": 1_000, "max_database_bytes": 1 << 30}


async def test_many_bridges_can_create_one_fresh_schema_at_once(
    postgres_url: str, postgres_schema: str
) -> None:
    assert not schema_exists(postgres_url, postgres_schema)
    opened: list[PostgresSharedJobStore | PostgresPresetStore | PostgresSessionStore] = []
    opened += await asyncio.gather(
        *(PostgresSharedJobStore.open(postgres_url, schema=postgres_schema) for _ in range(5)),
        *(PostgresPresetStore.open(postgres_url, schema=postgres_schema) for _ in range(3)),
        *(
            PostgresSessionStore.open(postgres_url, provider="p", schema=postgres_schema)
            for _ in range(3)
        ),
    )
    try:
        jobs = opened[0]
        assert isinstance(jobs, PostgresSharedJobStore)
        assert await jobs.healthy()
    finally:
        for store in opened:
            await store.close()
    rows = sql(
        postgres_url,
        f"SELECT component, version FROM {postgres_schema}.schema_migrations "  # noqa: S608
        "ORDER BY component",
    )
    assert rows == [
        ("jobs", 1), ("jobs", 2), ("jobs", 3), ("presets", 1), ("presets", 2), ("sessions", 1)
    ]  # fmt: skip


async def test_newer_schema_is_refused_untouched(postgres_url: str, postgres_schema: str) -> None:
    await (await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)).close()
    sql(
        postgres_url,
        f"INSERT INTO {postgres_schema}.schema_migrations VALUES ('jobs', 9, 1)",  # noqa: S608
    )
    with pytest.raises(BridgeError) as caught:
        await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)
    assert caught.value.code is ErrorCode.INTERNAL
    assert caught.value.message == (
        "durable job database schema version 9 is newer than this bridge supports"
    )
    assert caught.value.details["current_version"] == 3
    status = await inspect_job_schema(postgres_url, schema=postgres_schema)
    assert (status.version, status.current) == (9, False)
    # Other components in the same schema are not affected.
    await (await PostgresPresetStore.open(postgres_url, schema=postgres_schema)).close()


async def test_a_dropped_index_is_recreated_on_open(
    postgres_url: str, postgres_schema: str
) -> None:
    await (await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)).close()
    sql(postgres_url, f"DROP INDEX {postgres_schema}.image_jobs_submission_idx")
    async with await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema) as store:
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
        await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)
    assert caught.value.message == "durable job database has an unrecognised image_jobs table"
    assert "request_json" in caught.value.details["missing_columns"]
    # Nothing was recorded: the migration rolled back as a whole.
    status = await inspect_job_schema(postgres_url, schema=postgres_schema)
    assert not status.initialized


async def test_a_role_without_create_privileges_uses_prepared_tables(
    postgres_url: str, postgres_schema: str, limited_role: str
) -> None:
    with pytest.raises(BridgeError) as cannot_create:
        await PostgresSharedJobStore.open(limited_role, schema=postgres_schema)
    assert cannot_create.value.code is ErrorCode.INTERNAL
    assert cannot_create.value.details["sqlstate"] == "42501"  # insufficient_privilege

    # An administrator (here: the owner) creates the tables and grants plain DML.
    await (await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)).close()
    sql(postgres_url, f"GRANT USAGE ON SCHEMA {postgres_schema} TO limited_bridge")
    sql(
        postgres_url,
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
        f"{postgres_schema} TO limited_bridge",
    )
    async with await PostgresSharedJobStore.open(limited_role, schema=postgres_schema) as store:
        assert (await submit(store, 1)).created
        assert (await store.statistics()).total == 1
