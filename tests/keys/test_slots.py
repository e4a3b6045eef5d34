"""A key's ``max_concurrent`` across instances: two key services on one database file
stand for two bridge instances (tests/multiinstance/test_key_concurrency.py runs the real
processes on PostgreSQL)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.keys import KeyService, KeyServiceSettings, read_create
from imagebridge.storage import SqliteKeyStore
from imagebridge.storage.records import KeyRecord

pytestmark = pytest.mark.timeout(60)


async def _service(path: Path, lease_secs: int) -> KeyService:
    settings = KeyServiceSettings(slot_lease_secs=lease_secs, slot_poll_max_ms=100)
    return KeyService(await SqliteKeyStore.open(path), settings)


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[KeyService, KeyService, KeyRecord]]:
    first = await _service(tmp_path / "jobs.sqlite3", 1)
    second = await _service(tmp_path / "jobs.sqlite3", 1)
    issued = await first.create(read_create({"name": "solo", "max_concurrent": 1}), actor="test")
    record = await first.get(issued.key.id)
    try:
        yield first, second, record
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_slot_held_on_one_instance_makes_the_other_wait_then_refuse(
    pair: tuple[KeyService, KeyService, KeyRecord],
) -> None:
    first, second, record = pair
    held = await first.acquire_slot(record, 5)
    assert held is not None
    with pytest.raises(BridgeError) as refused:
        await second.acquire_slot(record, 0.3)
    assert refused.value.code is ErrorCode.RATE_LIMITED
    assert refused.value.details["reason"] == "key_concurrency"

    async def give_back_later() -> None:
        await asyncio.sleep(0.4)
        await first.release_slot(held)

    started = time.monotonic()
    releasing = asyncio.create_task(give_back_later())
    waited = await second.acquire_slot(record, 20)  # polls the database until it is free
    assert waited is not None
    assert time.monotonic() - started >= 0.4
    await releasing
    await second.release_slot(waited)


async def test_a_running_instance_renews_its_slot_and_a_dead_ones_comes_back(
    pair: tuple[KeyService, KeyService, KeyRecord],
) -> None:
    first, second, record = pair
    held = await first.acquire_slot(record, 5)
    assert held is not None
    # The lease is 1 s; the holder's heartbeat keeps it well past that.
    with pytest.raises(BridgeError):
        await second.acquire_slot(record, 2.5)
    # The holder dies without giving the slot back: its lease runs out, the slot returns.
    await first.aclose()
    started = time.monotonic()
    reclaimed = await second.acquire_slot(record, 20)
    assert reclaimed is not None
    assert time.monotonic() - started < 10
    await second.release_slot(reclaimed)
