"""Route selection: the primary, its fallbacks, the honour_size preference, no repeats."""

from __future__ import annotations

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.enums import Resolution, RoutingPreference
from imagebridge.contract.request import resolution_tier
from imagebridge.engine.registry import ProviderRegistry
from imagebridge.engine.routing import HONOUR_SIZE_MIN_EDGE, RoutePlanner
from imagebridge.engine.size_stats import SizeMatchStats
from tests.engine.runtime_requests import ONE, request
from tests.support.fakes import FakeProvider
from tests.support.runtime import make_runtime

# -- through the runtime -----------------------------------------------------------------------


async def test_implicit_primary_cannot_be_repeated_as_a_fallback() -> None:
    provider = FakeProvider("primary", caps=ONE)
    runtime = make_runtime(provider, FakeProvider("other", caps=ONE))
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(routing={"fallbacks": [{"provider": "primary"}]}))
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["field"] == "routing.fallbacks[0]"
    assert "attempts" not in caught.value.details
    assert provider.calls == 0


# -- the planner ---------------------------------------------------------------------------------

LARGE = f"{HONOUR_SIZE_MIN_EDGE + 512}x{HONOUR_SIZE_MIN_EDGE + 512}"
LARGE_TIER = resolution_tier(HONOUR_SIZE_MIN_EDGE + 512, HONOUR_SIZE_MIN_EDGE + 512)


def planner(
    prefer: RoutingPreference = RoutingPreference.DEFAULT,
    measured: dict[str, bool] | None = None,
    tier: Resolution = LARGE_TIER,
) -> RoutePlanner:
    """``primary`` (the default), ``sizer`` and ``spare``; ``measured``: whether each named
    transport delivered the size it was asked for, once."""
    names = ["primary", "sizer", "spare"]
    registry = ProviderRegistry([FakeProvider(name) for name in names], default="primary")
    stats = SizeMatchStats()
    for name, matched in (measured or {}).items():
        stats.record(name, "test-image", tier, matched)
    return RoutePlanner(registry, stats, prefer)


def test_the_named_provider_then_its_fallbacks_in_order() -> None:
    routes = planner().routes(
        request(
            routing={
                "provider": "sizer",
                "model": "m",
                "fallbacks": [{"provider": "spare"}, {"provider": "primary", "model": "n"}],
            }
        )
    )
    assert routes == [("sizer", "m"), ("spare", None), ("primary", "n")]
    assert planner().routes(request()) == [("primary", None)]


def test_honour_size_sends_a_large_size_to_the_transport_measured_best() -> None:
    measured = {"primary": False, "sizer": True}
    asked = request(parameters={"size": LARGE}, routing={"prefer": "honour_size"})
    # the preferred transport first, then the default the request would otherwise have used
    assert planner(measured=measured).routes(asked) == [("sizer", None), ("primary", None)]
    # the caller's fallbacks follow the preferred transport, without repeating it
    with_fallbacks = request(
        parameters={"size": LARGE},
        routing={
            "prefer": "honour_size",
            "fallbacks": [{"provider": "sizer"}, {"provider": "spare"}],
        },
    )
    assert planner(measured=measured).routes(with_fallbacks) == [
        ("sizer", None),
        ("spare", None),
        ("primary", None),
    ]
    # the config default applies to a request that does not say
    config_default = planner(RoutingPreference.HONOUR_SIZE, measured)
    assert config_default.routes(request(parameters={"size": LARGE}))[0] == ("sizer", None)


def test_honour_size_leaves_routing_alone_without_a_reason_to_move() -> None:
    measured = {"primary": False, "sizer": True}
    small = f"{HONOUR_SIZE_MIN_EDGE}x{HONOUR_SIZE_MIN_EDGE}"
    cases = [
        (planner(measured=measured), request(parameters={"size": LARGE})),  # not asked for
        (  # a size no larger than the bound
            planner(measured=measured, tier=resolution_tier(HONOUR_SIZE_MIN_EDGE, 1)),
            request(parameters={"size": small}, routing={"prefer": "honour_size"}),
        ),
        (planner(), request(parameters={"size": LARGE}, routing={"prefer": "honour_size"})),
        (  # the caller named a provider
            planner(measured=measured),
            request(
                parameters={"size": LARGE},
                routing={"prefer": "honour_size", "provider": "primary"},
            ),
        ),
    ]
    for routes, asked in cases:
        assert routes.routes(asked) == [("primary", None)]


def test_a_duplicate_resolved_route_is_refused_naming_the_fallback() -> None:
    with pytest.raises(BridgeError) as caught:
        planner().routes(
            request(routing={"fallbacks": [{"provider": "spare"}, {"provider": "spare"}]})
        )
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["field"] == "routing.fallbacks[1]"
    assert (caught.value.details["provider"], caught.value.details["model"]) == ("spare", None)
