"""Provider registry, and the behaviours the original's registry.rs tests check."""

from __future__ import annotations

import asyncio

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.engine.registry import ProviderRegistry
from tests.support.fakes import FakeProvider


def test_resolves_default_and_explicit_providers_deterministically() -> None:
    registry = ProviderRegistry([FakeProvider("zeta"), FakeProvider("alpha")], default="zeta")
    assert registry.resolve(None).name == "zeta"
    assert registry.resolve("alpha").name == "alpha"
    assert [d.name for d in registry.descriptors()] == ["alpha", "zeta"]
    with pytest.raises(BridgeError) as caught:
        registry.resolve("nope")
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.details == {"provider": "nope"}
    with pytest.raises(BridgeError) as bad:
        registry.resolve("Bad_Name")
    assert bad.value.message == "provider names must be lowercase ASCII identifiers"
    assert "provider" not in bad.value.details


@pytest.mark.parametrize(
    ("providers", "default"),
    [
        (["a", "a"], "a"),
        (["Bad_Name"], "Bad_Name"),
        (["a"], "b"),
        ([], "a"),
    ],
)
def test_rejects_collisions_invalid_names_and_missing_defaults(
    providers: list[str], default: str
) -> None:
    with pytest.raises(BridgeError) as caught:
        ProviderRegistry([FakeProvider(name) for name in providers], default=default)
    assert caught.value.code is ErrorCode.CONFIGURATION


async def test_capability_identity_is_checked() -> None:
    liar = FakeProvider("alpha", caps={"provider": "beta"})
    registry = ProviderRegistry([liar], default="alpha")
    with pytest.raises(BridgeError) as caught:
        await registry.capabilities("alpha", None)
    assert caught.value.code is ErrorCode.PROTOCOL


async def test_readiness_reports_each_provider_with_a_bounded_probe() -> None:
    class Slow(FakeProvider):
        async def check_ready(self) -> None:
            await asyncio.sleep(5)

    class Broken(FakeProvider):
        async def check_ready(self) -> None:
            raise BridgeError(ErrorCode.AUTHENTICATION, "log in")

    registry = ProviderRegistry([FakeProvider("ok"), Slow("slow"), Broken("broken")], default="ok")
    results = {r.provider: r for r in await registry.readiness(timeout=0.05)}
    assert results["ok"].ready
    assert results["slow"].error is not None and results["slow"].error.code is ErrorCode.TIMEOUT
    assert results["broken"].to_wire()["status"] == "not_ready"
