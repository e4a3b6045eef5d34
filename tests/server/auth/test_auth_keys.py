"""The access policy with named API keys: who is the admin, who is a key, and the
failed-authentication limit per client address (docs/keys.md, safety)."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.keys import KeyService, read_create, read_update
from imagebridge.server.auth import AccessPolicy, FailureThrottle
from imagebridge.storage import SqliteKeyStore
from imagebridge.storage.records import KeyLimits

HOST = (b"host", b"127.0.0.1:8787")


def bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [HOST, (b"authorization", f"Bearer {token}".encode())]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_throttle_refuses_an_address_past_its_limit_until_its_window_ends() -> None:
    clock = Clock()
    throttle = FailureThrottle(limit=2, window_s=10, max_clients=2, clock=clock)
    throttle.failed("a")
    throttle.check("a")
    throttle.failed("a")
    with pytest.raises(BridgeError) as refused:
        throttle.check("a")
    assert refused.value.code is ErrorCode.RATE_LIMITED
    assert refused.value.details["retry_after_ms"] == 10_000
    throttle.check("b")  # another address is not affected
    clock.now += 10
    throttle.check("a")  # the window ended


def test_the_throttle_forgets_the_oldest_address_beyond_its_bound() -> None:
    throttle = FailureThrottle(limit=1, window_s=60, max_clients=2, clock=Clock())
    for address in ("a", "b", "c"):
        throttle.failed(address)
    throttle.check("a")  # forgotten: memory stays bounded
    for address in ("b", "c"):
        with pytest.raises(BridgeError):
            throttle.check(address)


async def test_admin_key_anonymous_and_unknown_callers(tmp_path: Path) -> None:
    store = await SqliteKeyStore.open(tmp_path / "jobs.sqlite3")
    try:
        service = KeyService(store)
        issued = await service.create(read_create({"name": "ann"}), actor="test")
        record, secret = issued.key, issued.secret
        throttle = FailureThrottle(limit=5, window_s=60, max_clients=10)
        admin = AccessPolicy.with_token("admin-SECRET")
        policy = AccessPolicy(admin.expected, admin.owner, keys=service, throttle=throttle)
        assert policy.authentication_required

        boss = await policy.authenticate(bearer("admin-SECRET"), "10.0.0.1")
        assert boss.admin and boss.owner == admin.owner and boss.key is None
        member = await policy.authenticate(bearer(secret), "10.0.0.1")
        assert not member.admin and member.owner == f"key:{record.id}"
        for headers in ([HOST], bearer("ibk_" + "x" * 43), bearer("admin-SECRET ")):
            with pytest.raises(BridgeError) as refused:
                await policy.authenticate(headers, "10.0.0.2")
            assert refused.value.code is ErrorCode.AUTHENTICATION
            assert secret not in str(refused.value.to_dict())

        # Without an admin token keys still work, and nobody is the admin.
        keys_only = AccessPolicy(None, "anonymous-local", keys=service)
        assert (await keys_only.authenticate(bearer(secret), None)).key is not None
        with pytest.raises(BridgeError):
            await keys_only.authenticate([HOST], None)

        await service.update(record.id, read_update({"expires_at": 1}), actor="test")
        with pytest.raises(BridgeError):
            await policy.authenticate(bearer(secret), "10.0.0.1")
        await store.create("bob", KeyLimits(), secret_hash="0" * 64, prefix="ibk_bob", actor="test")
        with pytest.raises(BridgeError):  # the dummy hash of an unknown key never matches
            await policy.authenticate(bearer("whatever"), "10.0.0.3")
    finally:
        await store.close()
