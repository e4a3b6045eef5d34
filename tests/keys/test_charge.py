"""One request's charge on a key (``keys.charge``), on the real SQLite key store: providers,
slot, reservation, settlement and release, in the order and with the rules of docs/keys.md.

The HTTP and job paths that use it are tested end to end in tests/server/auth/test_keys.py and
tests/server/auth/test_keys_codex.py; here each rule is pinned on its own.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.response import Usage
from imagebridge.keys import KeyService
from imagebridge.storage.records import KeyRecord, KeyUsage
from tests.keys.conftest import image_request, image_response, make_key

pytestmark = pytest.mark.timeout(60)


async def _day_used(keys: KeyService, key: KeyRecord) -> int:
    record = await keys.get(key.id)
    return record.used_in("day", keys.windows().start("day"))


async def _usage(keys: KeyService) -> list[tuple[str, int, int, int, int]]:
    rows: list[KeyUsage] = await keys.store.usage()
    return [(r.account, r.requested, r.delivered, r.failed, r.unknown) for r in rows]


async def test_a_success_keeps_its_images_and_counts_them_on_the_accounts_that_served_them(
    keys: KeyService,
) -> None:
    key = await make_key(keys, "ann", images_per_day=5)
    response = image_response(3, served={"alpha": 2, "beta": 1})
    response.usage = Usage(total_tokens=70)
    async with keys.charge(key, image_request(3), default_provider="mock") as charge:
        assert charge.counters is not None  # read back with the images reserved
        assert keys.quota(charge.counters)["day"].remaining == 2
        charge.record(response)
    assert await _day_used(keys, key) == 3
    assert await _usage(keys) == [("alpha", 2, 2, 0, 0), ("beta", 1, 1, 0, 0)]
    assert [row.total_tokens for row in await keys.store.usage()] == [70, 0]


async def test_images_not_delivered_are_given_back(keys: KeyService) -> None:
    key = await make_key(keys, "bea", images_per_day=5)
    async with keys.charge(key, image_request(4), default_provider="mock") as charge:
        charge.record(image_response(3))  # best effort: 3 of 4
    assert await _day_used(keys, key) == 3
    assert charge.counters is not None and keys.quota(charge.counters)["day"].remaining == 2
    assert await _usage(keys) == [("", 4, 3, 1, 0)]


async def test_a_failure_gives_every_image_back_on_the_account_it_names(keys: KeyService) -> None:
    key = await make_key(keys, "cid", images_per_day=5)
    failure = BridgeError(ErrorCode.UPSTREAM, "boom", provider="other", details={"account": "b"})
    with pytest.raises(BridgeError) as raised:
        async with keys.charge(key, image_request(2), default_provider="mock"):
            raise failure
    assert raised.value is failure  # the caller's error, untouched
    assert await _day_used(keys, key) == 0
    rows = await keys.store.usage()
    assert [(r.provider, r.account, r.requested, r.failed) for r in rows] == [("other", "b", 2, 2)]


async def test_an_unknown_outcome_keeps_its_reservation(keys: KeyService) -> None:
    key = await make_key(keys, "dan", images_per_day=5)
    stalled = BridgeError(ErrorCode.UPSTREAM, "stalled", details={"outcome": "unknown"})
    async with keys.charge(key, image_request(2), default_provider="mock") as charge:
        charge.record(stalled)  # the job path records its error instead of raising it
    assert await _day_used(keys, key) == 2
    assert await _usage(keys) == [("", 2, 0, 0, 2)]


@pytest.mark.parametrize("provider", ["codex-responses", None])
async def test_a_provider_off_the_allow_list_holds_nothing(
    keys: KeyService, provider: str | None
) -> None:
    """The route, the default provider it falls to, or any fallback: 403 before the slot."""
    key = await make_key(keys, "eve", providers=["mock"], max_concurrent=1, images_per_day=5)
    routes = [
        image_request(1, provider),
        image_request(1, "mock", fallbacks=[{"provider": "codex-responses"}]),
    ]
    for request in routes:
        charge = keys.charge(key, request, default_provider="codex-responses", slot_wait_s=0)
        with pytest.raises(BridgeError) as refused:
            async with charge:
                pytest.fail("the block must not run")
        assert refused.value.code is ErrorCode.PERMISSION_DENIED
        assert charge.counters is None  # nothing read: the answer shows the caller's counters
    async with keys.charge(key, image_request(1), default_provider="mock", slot_wait_s=0):
        pass  # the slot was never taken
    assert await _day_used(keys, key) == 1
    assert await _usage(keys) == []


async def test_a_refused_reservation_gives_the_slot_back_and_reads_the_counters(
    keys: KeyService,
) -> None:
    key = await make_key(keys, "fay", images_per_day=1, max_concurrent=1)
    charge = keys.charge(key, image_request(2), default_provider="mock", slot_wait_s=0)
    with pytest.raises(BridgeError) as refused:
        async with charge:
            pytest.fail("the block must not run")
    assert refused.value.code is ErrorCode.RATE_LIMITED
    assert refused.value.details["reason"] == "key_quota"
    assert charge.counters is not None and keys.quota(charge.counters)["day"].remaining == 1
    async with keys.charge(key, image_request(1), default_provider="mock", slot_wait_s=0) as ok:
        ok.record(image_response(1))
    assert await _day_used(keys, key) == 1


async def test_the_slot_is_held_for_the_block_and_given_back_however_it_ends(
    keys: KeyService,
) -> None:
    key = await make_key(keys, "gus", max_concurrent=1, images_per_day=10)
    busy: list[BridgeError] = []

    async def failing_call() -> None:
        async with keys.charge(key, image_request(1), default_provider="mock", slot_wait_s=0):
            waiting = keys.charge(key, image_request(1), default_provider="mock", slot_wait_s=0.05)
            try:
                async with waiting:
                    pytest.fail("a second request of the key may not run beside the first")
            except BridgeError as refused:
                busy.append(refused)
            assert await _day_used(keys, key) == 1  # the waiting one reserved nothing
            raise BridgeError(ErrorCode.UPSTREAM, "boom")

    with pytest.raises(BridgeError, match="boom"):
        await failing_call()
    assert [error.details["reason"] for error in busy] == ["key_concurrency"]
    async with keys.charge(key, image_request(1), default_provider="mock", slot_wait_s=0) as ok:
        ok.record(image_response(1))
    assert await _usage(keys) == [("", 2, 1, 1, 0)]


async def test_a_cancelled_call_keeps_its_reservation_counts_nothing_and_frees_the_slot(
    keys: KeyService,
) -> None:
    key = await make_key(keys, "hal", max_concurrent=1, images_per_day=10)
    entered = asyncio.Event()

    async def call() -> None:
        async with keys.charge(key, image_request(2), default_provider="mock", slot_wait_s=0):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(call())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _day_used(keys, key) == 2  # the call may have run upstream: kept
    assert await _usage(keys) == []
    async with keys.charge(key, image_request(1), default_provider="mock", slot_wait_s=0):
        pass  # the slot came back; a block without an outcome settles nothing either
    assert await _day_used(keys, key) == 3
    assert await _usage(keys) == []


async def test_a_charge_without_a_slot_wait_takes_no_slot(keys: KeyService) -> None:
    """A key's job waits in the job queue, not for one of the key's slots."""
    key = await make_key(keys, "ida", max_concurrent=1)
    async with keys.charge(key, image_request(1), default_provider="mock") as first:
        async with keys.charge(key, image_request(1), default_provider="mock") as second:
            second.record(image_response(1))
        first.record(image_response(1))
    assert await _usage(keys) == [("", 2, 2, 0, 0)]


async def test_a_settlement_the_store_refuses_is_logged_never_raised(
    keys: KeyService, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    key = await make_key(keys, "joe", images_per_day=5)

    async def refuse(usage: KeyUsage) -> None:
        raise BridgeError(ErrorCode.INTERNAL, "database away")

    monkeypatch.setattr(keys.store, "record_usage", refuse)
    with caplog.at_level(logging.ERROR, logger="imagebridge.keys"):
        async with keys.charge(key, image_request(2), default_provider="mock") as charge:
            charge.record(image_response(2))
    assert "could not settle an API key's reservation" in caplog.text
    assert charge.counters is not None  # as read when the images were reserved
    assert keys.quota(charge.counters)["day"].remaining == 3
