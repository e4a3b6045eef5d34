"""PostgreSQL key store: a schema of version 1 (before slots) is migrated in place."""

from __future__ import annotations

from typing import Any

import pytest

from imagebridge.storage import PostgresKeyStore
from imagebridge.storage.lifecycle import KEY_STORE
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.keys import KEY_SCHEMA
from imagebridge.storage.rules.schema import StoreSchema

pytestmark = pytest.mark.postgres


async def test_a_key_table_without_slots_is_migrated(
    postgres_url: str, postgres_schema: str
) -> None:
    old = StoreSchema(KEY_SCHEMA.recorded_as, KEY_SCHEMA.migrations[:1])
    database = await PostgresDatabase.open(
        postgres_url, schema=postgres_schema, store_schema=old, code=KEY_STORE.code, label="keys"
    )
    table = database.table("api_keys")

    async def insert(conn: Any) -> None:
        await conn.execute(
            f"INSERT INTO {table} (id, name, prefix, secret_hash, created_at, updated_at, "  # noqa: S608
            "max_concurrent) VALUES ('key_old', 'old', 'ibk_x', 'h', 1, 1, 1)"
        )

    await database.run(insert)
    await database.close()
    store = await PostgresKeyStore.open(postgres_url, schema=postgres_schema)
    try:
        assert (await store.get("key_old")).limits.max_concurrent == 1
        lease = {"holder": "me", "now_ms": 1, "expires_ms": 2}
        assert await store.acquire_slot("key_old", "a", **lease)
        assert not await store.acquire_slot("key_old", "b", **lease)
    finally:
        await store.close()


async def test_usage_without_kept_and_replayed_counts_is_migrated(
    postgres_url: str, postgres_schema: str
) -> None:
    """Key schema 2 → 3 (issue 39): older usage rows read 0 kept and 0 replayed."""
    from imagebridge.storage.records import KeyUsage

    old = StoreSchema(KEY_SCHEMA.recorded_as, KEY_SCHEMA.migrations[:2])
    database = await PostgresDatabase.open(
        postgres_url, schema=postgres_schema, store_schema=old, code=KEY_STORE.code, label="keys"
    )
    table = database.table("api_key_usage")

    async def insert(conn: Any) -> None:
        await conn.execute(
            f"INSERT INTO {table} (key_id, day, provider, account, requested, delivered, "  # noqa: S608
            "failed, unknown) VALUES ('key_old', '2026-01-04', 'mock', '', 2, 2, 0, 0)"
        )

    await database.run(insert)
    await database.close()
    store = await PostgresKeyStore.open(postgres_url, schema=postgres_schema)
    try:
        [row] = await store.usage()
        assert (row.delivered, row.kept, row.replayed) == (2, 0, 0)
        await store.record_usage(KeyUsage("key_old", "2026-01-04", "mock", "", 1, 1, 0, 0, kept=1))
        [row] = await store.usage()
        assert (row.requested, row.delivered, row.kept, row.replayed) == (3, 3, 1, 0)
    finally:
        await store.close()
