"""PostgresPresetStore specifics: one schema shared with jobs, concurrent creates."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import PostgresPresetStore, PostgresSharedJobStore
from imagebridge.storage.lifecycle import PRESET_STORE
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.jobs import inspect_job_schema
from imagebridge.storage.postgres.presets import PRESET_SCHEMA, inspect_preset_schema
from imagebridge.storage.postgres.sessions import inspect_session_schema
from imagebridge.storage.rules.schema import StoreSchema

from ..conftest import SCOPE, job_id, request

pytestmark = pytest.mark.postgres


async def test_presets_share_the_jobs_schema(postgres_url: str, postgres_schema: str) -> None:
    jobs = await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)
    presets = await PostgresPresetStore.open(postgres_url, schema=postgres_schema)
    try:
        await jobs.create(
            SCOPE, job_id(1), request("x"), "x", now=1, max_pending=5, max_database_bytes=1 << 30
        )
        await presets.create("shared", description=None, template_json={}, now=1)
        assert (await jobs.statistics()).total == 1
        assert (await presets.get("shared")).name == "shared"
    finally:
        await presets.close()
        await jobs.close()
    for inspect, version in (
        (inspect_job_schema, 3),
        (inspect_preset_schema, 2),
        (inspect_session_schema, None),
    ):
        status = await inspect(postgres_url, schema=postgres_schema)
        assert status.version == version


async def test_concurrent_creates_of_one_name_conflict_cleanly(
    postgres_url: str, postgres_schema: str
) -> None:
    stores = [
        await PostgresPresetStore.open(postgres_url, schema=postgres_schema) for _ in range(3)
    ]
    try:

        async def create(store: PostgresPresetStore, n: int) -> BridgeError | None:
            try:
                await store.create("race", description=f"d{n}", template_json={}, now=n)
            except BridgeError as error:
                return error
            return None

        outcomes = await asyncio.gather(*(create(stores[n % 3], n) for n in range(9)))
        errors = [o for o in outcomes if o is not None]
        assert len(errors) == 8
        assert {(e.code, e.http_status) for e in errors} == {(ErrorCode.IDEMPOTENCY_CONFLICT, 409)}
        assert [p.name for p in (await stores[0].list()).items] == ["race"]
    finally:
        for store in stores:
            await store.close()


async def test_a_schema_of_presets_without_owners_is_migrated_to_shared_ones(
    postgres_url: str, postgres_schema: str
) -> None:
    old = StoreSchema(PRESET_SCHEMA.recorded_as, PRESET_SCHEMA.migrations[:1])
    database = await PostgresDatabase.open(
        postgres_url,
        schema=postgres_schema,
        store_schema=old,
        code=PRESET_STORE.code,
        label=PRESET_STORE.label,
    )
    table = database.table("image_presets")

    async def insert(conn: Any) -> None:
        await conn.execute(
            f"INSERT INTO {table} VALUES ('fox', 'old', '{{\"prompt\": \"a fox\"}}', 1, 2)"  # noqa: S608
        )

    await database.run(insert)
    await database.close()
    assert (await inspect_preset_schema(postgres_url, schema=postgres_schema)).version == 1

    presets = await PostgresPresetStore.open(postgres_url, schema=postgres_schema)
    try:
        kept = await presets.get("fox")
        assert (kept.description, kept.created_at, kept.updated_at) == ("old", 1, 2)
        assert kept.template() == {"prompt": "a fox"}
        assert (await presets.get("fox", owner="key:aaaa", shared=True)).description == "old"
        await presets.create("fox", description="a's", template_json={}, now=3, owner="key:aaaa")
        assert (await presets.get("fox")).description == "old"
    finally:
        await presets.close()
    status = await inspect_preset_schema(postgres_url, schema=postgres_schema)
    assert status.version == 2
