"""SqliteKeyStore: keys kept as hashes, one-statement quota reservations, usage and audit.

tests/storage/postgres/test_keys_suite.py runs these same tests on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import KeyStore, SqliteKeyStore
from imagebridge.storage.records import KeyLimits, KeyUsage
from imagebridge.storage.rules.keys import (
    display_prefix,
    hash_secret,
    looks_like_key,
    mint_secret,
    windows_at,
)

UTC = ZoneInfo("UTC")
NOW = 1_767_225_600 + 3 * 86_400 + 3600  # 2026-01-04 01:00 UTC, a Sunday


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "jobs.sqlite3"


async def _create(store: KeyStore, name: str, limits: KeyLimits) -> tuple[str, str]:
    secret = mint_secret()
    record = await store.create(
        name, limits, secret_hash=hash_secret(secret), prefix=display_prefix(secret), actor="admin"
    )
    return record.id, secret


def test_secrets_are_recognisable_and_long() -> None:
    secret = mint_secret()
    assert secret.startswith("ibk_") and looks_like_key(secret)
    assert len(secret) >= 4 + 43  # 32 random bytes, base64url
    assert display_prefix(secret) == secret[:12]
    assert hash_secret(secret) != hash_secret(mint_secret())


def test_calendar_windows_in_a_time_zone() -> None:
    windows = windows_at(NOW, UTC)
    assert windows.date == "2026-01-04"
    assert windows.day == NOW - 3600
    assert windows.week == windows.day - 6 * 86_400  # Monday 2025-12-29
    assert windows.month == 1_767_225_600
    assert windows.day_end == windows.day + 86_400
    assert windows.month_end == 1_767_225_600 + 31 * 86_400
    # Ten hours west it is still Saturday the 3rd.
    west = windows_at(NOW, ZoneInfo("America/Los_Angeles"))
    assert west.date == "2026-01-03"


async def test_store_satisfies_the_protocol_and_keeps_hashes_only(path: Path) -> None:
    store = await SqliteKeyStore.open(path)
    try:
        assert isinstance(store, KeyStore)
        key_id, secret = await _create(store, "alice", KeyLimits(images_per_day=3))
        found = await store.find(hash_secret(secret))
        assert found is not None and found[0].id == key_id
        assert await store.find(hash_secret(mint_secret())) is None
        record = await store.get(key_id)
        assert record.name == "alice" and record.prefix == secret[:12]
        assert record.limits.images_per_day == 3
        assert [r.name for r in await store.list()] == ["alice"]
    finally:
        await store.close()
    if path.exists():  # SQLite: the secret itself is nowhere in the file
        assert secret.encode() not in path.read_bytes()


async def test_duplicate_name_and_bad_limits_are_refused(path: Path) -> None:
    store = await SqliteKeyStore.open(path)
    try:
        await _create(store, "bob", KeyLimits())
        with pytest.raises(BridgeError) as taken:
            await _create(store, "bob", KeyLimits())
        assert taken.value.field == "name"
        with pytest.raises(BridgeError) as bad:
            await _create(store, "no spaces", KeyLimits())
        assert bad.value.code is ErrorCode.INVALID_REQUEST
        with pytest.raises(BridgeError) as missing:
            await store.get("key_missing")
        assert missing.value.http_status == 404
    finally:
        await store.close()


async def test_reservation_stops_at_every_window_and_resets_with_the_period(path: Path) -> None:
    store = await SqliteKeyStore.open(path)
    try:
        key_id, _ = await _create(store, "carol", KeyLimits(images_per_day=3, images_per_week=4))
        windows = windows_at(NOW, UTC)
        assert await store.reserve(key_id, 2, windows) is not None
        assert await store.reserve(key_id, 2, windows) is None  # 4 > 3 a day
        taken = await store.reserve(key_id, 1, windows)
        assert taken is not None and taken.used_in("day", windows.day) == 3
        tomorrow = windows_at(NOW + 86_400, UTC)  # Monday: a new day and a new week
        assert tomorrow.week != windows.week
        again = await store.reserve(key_id, 3, tomorrow)
        assert again is not None and again.used_in("week", tomorrow.week) == 3
        assert await store.reserve(key_id, 2, tomorrow) is None  # the week has 1 left
        # A reservation of an instance whose clock is behind never resets the counter.
        assert await store.reserve(key_id, 3, windows) is None
    finally:
        await store.close()


async def test_release_gives_back_only_to_its_own_period(path: Path) -> None:
    store = await SqliteKeyStore.open(path)
    try:
        key_id, _ = await _create(store, "dave", KeyLimits(images_per_day=2))
        today = windows_at(NOW, UTC)
        assert await store.reserve(key_id, 2, today) is not None
        released = await store.release(key_id, 1, today)
        assert released is not None and released.used_in("day", today.day) == 1
        assert await store.release(key_id, 5, today) is not None  # never below zero
        assert (await store.get(key_id)).used_in("day", today.day) == 0
        tomorrow = windows_at(NOW + 86_400, UTC)
        assert await store.reserve(key_id, 2, tomorrow) is not None
        await store.release(key_id, 2, today)  # yesterday's give-back: nothing changes
        assert (await store.get(key_id)).used_in("day", tomorrow.day) == 2
    finally:
        await store.close()


async def test_revoked_or_expired_keys_reserve_nothing(path: Path) -> None:
    store = await SqliteKeyStore.open(path)
    try:
        windows = windows_at(NOW, UTC)
        revoked, _ = await _create(store, "erin", KeyLimits())
        await store.revoke(revoked, actor="admin")
        assert await store.reserve(revoked, 1, windows) is None
        expired, _ = await _create(store, "frank", KeyLimits(expires_at=NOW - 1))
        assert await store.reserve(expired, 1, windows) is None
        assert not (await store.get(expired)).active(NOW)
        live, _ = await _create(store, "gina", KeyLimits(expires_at=NOW + 60))
        assert await store.reserve(live, 1, windows) is not None
    finally:
        await store.close()


async def test_concurrent_reservations_on_two_connections_are_exact(path: Path) -> None:
    first = await SqliteKeyStore.open(path)
    second = await SqliteKeyStore.open(path)
    try:
        key_id, _ = await _create(first, "team", KeyLimits(images_per_day=10))
        windows = windows_at(NOW, UTC)
        stores = [first, second] * 20
        results = await asyncio.gather(*(s.reserve(key_id, 1, windows) for s in stores))
        assert sum(result is not None for result in results) == 10
        assert (await second.get(key_id)).used_in("day", windows.day) == 10
    finally:
        await first.close()
        await second.close()


async def test_update_rotate_and_audit(path: Path) -> None:
    store = await SqliteKeyStore.open(path)
    try:
        key_id, secret = await _create(store, "hank", KeyLimits(images_per_day=1))
        updated = await store.update(
            key_id, {"images_per_day": None, "providers": ["mock"]}, actor="admin"
        )
        assert updated.limits.images_per_day is None
        assert updated.limits.providers == ("mock",)
        with pytest.raises(BridgeError):
            await store.update(key_id, {"colour": "red"}, actor="admin")
        new_secret = mint_secret()
        await store.rotate(
            key_id,
            secret_hash=hash_secret(new_secret),
            prefix=display_prefix(new_secret),
            actor="cli",
        )
        assert await store.find(hash_secret(secret)) is None
        assert await store.find(hash_secret(new_secret)) is not None
        await store.revoke(key_id, actor="cli")
        with pytest.raises(BridgeError):  # a refused change is not audited
            await store.rotate(
                key_id, secret_hash=hash_secret(mint_secret()), prefix="x", actor="cli"
            )
        with pytest.raises(BridgeError):
            await _create(store, "hank", KeyLimits())
        entries = await store.audit()
        assert [(e.action, e.actor, e.key_name) for e in entries] == [
            ("create", "admin", "hank"),
            ("update", "admin", "hank"),
            ("rotate", "cli", "hank"),
            ("revoke", "cli", "hank"),
        ]
        assert entries[1].details == {"images_per_day": None, "providers": ["mock"]}
        assert all(secret not in repr(e) and new_secret not in repr(e) for e in entries)
    finally:
        await store.close()


async def test_usage_adds_up_per_day_provider_and_account(path: Path) -> None:
    store = await SqliteKeyStore.open(path)
    try:
        key_id, _ = await _create(store, "ivy", KeyLimits())
        row = KeyUsage(key_id, "2026-01-04", "mock", "", 2, 1, 1, 0)
        await store.record_usage(row)
        await store.record_usage(row)
        await store.record_usage(KeyUsage(key_id, "2026-01-05", "codex-responses", "a", 1, 0, 0, 1))
        rows = await store.usage(key_id=key_id)
        assert [(r.day, r.provider, r.requested, r.delivered, r.failed) for r in rows] == [
            ("2026-01-04", "mock", 4, 2, 2),
            ("2026-01-05", "codex-responses", 1, 0, 0),
        ]
        assert [r.day for r in await store.usage(since="2026-01-05")] == ["2026-01-05"]
        assert [r.day for r in await store.usage(account="a")] == ["2026-01-05"]
        assert await store.usage(provider="nope") == []
    finally:
        await store.close()


async def test_concurrency_slots_are_counted_in_the_database(path: Path) -> None:
    first = await SqliteKeyStore.open(path)
    second = await SqliteKeyStore.open(path)
    try:
        key_id, _ = await _create(first, "pair", KeyLimits(max_concurrent=3))
        unlimited, _ = await _create(first, "free", KeyLimits())
        lease = {"holder": "test", "now_ms": 1_000, "expires_ms": 60_000}
        stores = [first, second] * 10
        taken = await asyncio.gather(
            *(s.acquire_slot(key_id, f"slot-{n}", **lease) for n, s in enumerate(stores))
        )
        assert sum(taken) == 3  # exact across two connections (two instances)
        held = [f"slot-{n}" for n, ok in enumerate(taken) if ok]
        # No limit: no slot is ever taken (the caller does not ask for one).
        assert not await first.acquire_slot(unlimited, "other", **lease)
        assert await second.release_slot(key_id, held[0])
        assert not await second.release_slot(key_id, held[0])  # given back once only
        assert await first.acquire_slot(key_id, "again", **lease)
        assert not await first.acquire_slot(key_id, "one-more", **lease)
    finally:
        await first.close()
        await second.close()


async def test_expired_slot_leases_are_reclaimed_once(path: Path) -> None:
    async with await SqliteKeyStore.open(path) as store:
        key_id, _ = await _create(store, "lease", KeyLimits(max_concurrent=2))
        for slot, expires in (("renewed", 5_000), ("dead", 5_000)):
            assert await store.acquire_slot(
                key_id, slot, holder="gone", now_ms=1_000, expires_ms=expires
            )
        assert await store.renew_slots(["renewed", "unknown"], expires_ms=20_000) == 1
        assert await store.reclaim_slots(key_id, now_ms=4_999) == 0  # not expired yet
        assert not await store.acquire_slot(
            key_id, "new", holder="me", now_ms=4_999, expires_ms=9_000
        )
        assert await store.reclaim_slots(key_id, now_ms=5_000) == 1  # "dead", not "renewed"
        assert await store.reclaim_slots(key_id, now_ms=5_000) == 0
        assert not await store.release_slot(key_id, "dead")  # its count went back already
        assert await store.acquire_slot(key_id, "new", holder="me", now_ms=5_000, expires_ms=9_000)
        assert not await store.acquire_slot(
            key_id, "third", holder="me", now_ms=5_000, expires_ms=9_000
        )


async def test_a_key_table_without_slots_is_migrated(path: Path) -> None:
    from imagebridge.storage.lifecycle import KEY_STORE
    from imagebridge.storage.rules.schema import StoreSchema
    from imagebridge.storage.sqlite.database import SqliteDatabase
    from imagebridge.storage.sqlite.keys import KEY_SCHEMA

    old = StoreSchema(KEY_SCHEMA.recorded_as, KEY_SCHEMA.migrations[:1])
    database = await SqliteDatabase.open(path, store_schema=old, code=KEY_STORE.code, label="keys")
    await database.run(
        lambda conn: conn.execute(
            "INSERT INTO api_keys (id, name, prefix, secret_hash, created_at, updated_at, "
            "max_concurrent) VALUES ('key_old', 'old', 'ibk_x', 'h', 1, 1, 1)"
        )
    )
    await database.close()
    async with await SqliteKeyStore.open(path) as store:
        assert (await store.get("key_old")).limits.max_concurrent == 1
        lease = {"holder": "me", "now_ms": 1, "expires_ms": 2}
        assert await store.acquire_slot("key_old", "a", **lease)
        assert not await store.acquire_slot("key_old", "b", **lease)


async def test_usage_without_kept_and_replayed_counts_is_migrated(path: Path) -> None:
    """Key schema 2 → 3 (issue 39): older usage rows read 0 kept and 0 replayed, and new
    outcomes add to the same rows."""
    from imagebridge.storage.lifecycle import KEY_STORE
    from imagebridge.storage.rules.schema import StoreSchema
    from imagebridge.storage.sqlite.database import SqliteDatabase
    from imagebridge.storage.sqlite.keys import KEY_SCHEMA

    old = StoreSchema(KEY_SCHEMA.recorded_as, KEY_SCHEMA.migrations[:2])
    database = await SqliteDatabase.open(path, store_schema=old, code=KEY_STORE.code, label="keys")
    await database.run(
        lambda conn: conn.execute(
            "INSERT INTO api_key_usage (key_id, day, provider, account, requested, delivered, "
            "failed, unknown) VALUES ('key_old', '2026-01-04', 'mock', '', 2, 2, 0, 0)"
        )
    )
    await database.close()
    async with await SqliteKeyStore.open(path) as store:
        [row] = await store.usage()
        assert (row.delivered, row.kept, row.replayed) == (2, 0, 0)
        await store.record_usage(KeyUsage("key_old", "2026-01-04", "mock", "", 1, 1, 0, 0, kept=1))
        await store.record_usage(
            KeyUsage("key_old", "2026-01-04", "mock", "", 0, 0, 0, 0, replayed=1)
        )
        [row] = await store.usage()
        assert (row.requested, row.delivered, row.kept, row.replayed) == (3, 3, 1, 1)
