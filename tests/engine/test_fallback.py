"""Fallback: which failures move on to the next route, and what the answer says about it."""

from __future__ import annotations

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.enums import FallbackPolicy
from imagebridge.engine.breaker import BreakerConfig
from imagebridge.engine.fallback import should_fallback
from imagebridge.engine.materialize import Materializer
from imagebridge.engine.publishing import PublishedArtifact
from tests.engine.runtime_requests import ONE, request
from tests.support.fakes import FakeProvider
from tests.support.runtime import make_runtime

# -- behaviour statements ----------------------------------------------------------------------


async def test_unavailable_primary_falls_back_in_order_and_records_attempts() -> None:
    primary = FakeProvider(
        "primary", caps=ONE, fail_capabilities=BridgeError(ErrorCode.AUTHENTICATION, "log in")
    )
    fallback = FakeProvider("fallback", caps=ONE)
    runtime = make_runtime(primary, fallback)
    response = await runtime.execute(request(routing={"fallbacks": [{"provider": "fallback"}]}))
    assert [(a.provider, a.outcome.value, a.error_code) for a in response.attempts] == [
        ("primary", "failed", ErrorCode.AUTHENTICATION),
        ("fallback", "succeeded", None),
    ]
    assert response.provider == "fallback"
    assert "provider_fallback_used" in response.warnings
    assert response.normalizations[0].reason == "provider_fallback"
    assert response.normalizations[0].requested == "primary"
    assert primary.calls == 0 and fallback.calls == 1


async def test_open_primary_circuit_fails_fast_and_preserves_explicit_fallback() -> None:
    primary = FakeProvider("primary", caps=ONE, fail=BridgeError(ErrorCode.UPSTREAM, "down"))
    fallback = FakeProvider("fallback", caps=ONE)
    runtime = make_runtime(primary, fallback, breaker=BreakerConfig(failure_threshold=1))
    routed = request(
        routing={"fallbacks": [{"provider": "fallback"}], "fallback_policy": "on_error"}
    )
    assert (await runtime.execute(routed)).provider == "fallback"
    second = await runtime.execute(routed)
    assert second.provider == "fallback"
    assert second.attempts[0].error_code is ErrorCode.OVERLOADED
    assert primary.calls == 1 and fallback.calls == 2


async def test_unknown_outcome_opens_only_for_later_calls_without_retrying_current_call() -> None:
    primary = FakeProvider(
        "primary", caps=ONE, fail=BridgeError(ErrorCode.UPSTREAM, "?").mark_unknown_outcome()
    )
    fallback = FakeProvider("fallback", caps=ONE)
    runtime = make_runtime(primary, fallback, breaker=BreakerConfig(failure_threshold=1))
    routed = request(
        routing={"fallbacks": [{"provider": "fallback"}], "fallback_policy": "on_error"}
    )
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(routed)
    assert caught.value.details["outcome"] == "unknown"
    assert fallback.calls == 0
    assert runtime.breaker_snapshot()["primary"]["state"] == "open"
    assert (await runtime.execute(routed)).provider == "fallback"
    assert primary.calls == 1


@pytest.mark.parametrize(
    "failure",
    [
        BridgeError.safety_rejected("no"),
        BridgeError(ErrorCode.UPSTREAM, "?").mark_unknown_outcome(),
    ],
)
async def test_fallback_never_bypasses_safety_or_unknown_outcomes(failure: BridgeError) -> None:
    primary = FakeProvider("primary", caps=ONE, fail=failure)
    fallback = FakeProvider("fallback", caps=ONE)
    runtime = make_runtime(primary, fallback)
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(
            request(
                routing={"fallbacks": [{"provider": "fallback"}], "fallback_policy": "on_error"}
            )
        )
    assert fallback.calls == 0
    assert len(caught.value.details["attempts"]) == 1


async def test_on_error_expands_but_does_not_replace_unavailable_policy() -> None:
    for policy, expected_calls in (("on_unavailable", 0), ("on_error", 1)):
        primary = FakeProvider("primary", caps=ONE, fail=BridgeError(ErrorCode.UPSTREAM, "x"))
        fallback = FakeProvider("fallback", caps=ONE)
        runtime = make_runtime(primary, fallback)
        routed = request(
            routing={"fallbacks": [{"provider": "fallback"}], "fallback_policy": policy}
        )
        if expected_calls:
            assert (await runtime.execute(routed)).provider == "fallback"
        else:
            with pytest.raises(BridgeError):
                await runtime.execute(routed)
        assert fallback.calls == expected_calls


async def test_fallbacks_are_tried_in_the_listed_order() -> None:
    primary = FakeProvider(
        "primary", caps=ONE, fail_capabilities=BridgeError(ErrorCode.AUTHENTICATION, "log in")
    )
    second = FakeProvider("second", caps=ONE, fail=BridgeError(ErrorCode.RATE_LIMITED, "busy"))
    third = FakeProvider("third", caps=ONE)
    unused = FakeProvider("unused", caps=ONE)
    runtime = make_runtime(primary, second, third, unused)
    response = await runtime.execute(
        request(
            routing={
                "fallbacks": [{"provider": "second"}, {"provider": "third"}, {"provider": "unused"}]
            }
        )
    )
    assert response.provider == "third"
    assert [(a.provider, a.error_code) for a in response.attempts] == [
        ("primary", ErrorCode.AUTHENTICATION),
        ("second", ErrorCode.RATE_LIMITED),
        ("third", None),
    ]
    assert (second.calls, third.calls, unused.calls) == (1, 1, 0)


async def test_unknown_provider_is_a_configuration_error_with_attempts() -> None:
    runtime = make_runtime(FakeProvider(caps=ONE))
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(routing={"provider": "nope"}))
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.details["provider"] == "nope"
    assert len(caught.value.details["attempts"]) == 1


async def test_a_sidecar_failure_after_a_fallback_carries_every_attempt() -> None:
    """The original dropped the attempts when the sidecar failed after the images were made."""

    class NoSidecars:
        async def publish(self, publication: object) -> PublishedArtifact:
            return PublishedArtifact(id="0190-id", name="a.png")

        async def attach_metadata(self, artifact_id: str, name: str, record: object) -> str:
            raise BridgeError(ErrorCode.ARTIFACT, "sidecar refused")

    primary = FakeProvider("primary", caps=ONE, fail=BridgeError(ErrorCode.RATE_LIMITED, "busy"))
    fallback = FakeProvider("fallback", caps=ONE)
    runtime = make_runtime(primary, fallback, materializer=Materializer(artifacts=NoSidecars()))
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(
            request(
                routing={"fallbacks": [{"provider": "fallback"}]},
                output={"response_format": "artifact", "metadata": "sidecar"},
            )
        )
    assert caught.value.message == "sidecar refused"
    assert [(a["provider"], a["outcome"]) for a in caught.value.details["attempts"]] == [
        ("primary", "failed"),
        ("fallback", "succeeded"),
    ]


# -- the fallback table: which error codes move on to a fallback route, under which policy -----


UNAVAILABLE = [
    "configuration",
    "authentication",
    "unsupported_capability",
    "rate_limited",
    "overloaded",
]


ON_ERROR_ONLY = ["upstream", "protocol", "artifact", "input", "internal"]


NEVER = [
    "invalid_request",
    "permission_denied",
    "safety_rejected",
    "cancelled",
    "session",
    "idempotency_conflict",
    "timeout",
]


@pytest.mark.parametrize("code", UNAVAILABLE + ON_ERROR_ONLY + NEVER)
@pytest.mark.parametrize("policy", ["on_unavailable", "on_error"])
async def test_fallback_table(code: str, policy: str) -> None:
    primary = FakeProvider("primary", caps=ONE, fail=BridgeError(ErrorCode(code), "scripted"))
    fallback = FakeProvider("fallback", caps=ONE)
    runtime = make_runtime(primary, fallback)
    routed = request(routing={"fallbacks": [{"provider": "fallback"}], "fallback_policy": policy})
    expected = code in UNAVAILABLE or (policy == "on_error" and code in ON_ERROR_ONLY)
    if expected:
        response = await runtime.execute(routed)
        assert response.provider == "fallback"
    else:
        with pytest.raises(BridgeError) as caught:
            await runtime.execute(routed)
        assert caught.value.code is ErrorCode(code)
        assert [a["error_code"] for a in caught.value.details["attempts"]] == [code]
    assert fallback.calls == int(expected)
    assert should_fallback(BridgeError(ErrorCode(code), "x"), FallbackPolicy(policy)) is expected
