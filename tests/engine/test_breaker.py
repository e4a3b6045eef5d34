"""Circuit breaker, and the behaviours the original's circuit_breaker.rs tests check."""

from __future__ import annotations

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.engine.breaker import BreakerConfig, CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def upstream() -> BridgeError:
    return BridgeError(ErrorCode.UPSTREAM, "boom", retryable=True)


def breaker(clock: Clock, **overrides: int) -> CircuitBreaker:
    config = BreakerConfig(failure_threshold=2, open_duration_ms=20, **overrides)  # type: ignore[arg-type]
    return CircuitBreaker("p", config, clock)


def test_opens_after_threshold_and_recovers_through_half_open() -> None:
    clock = Clock()
    circuit = breaker(clock)
    for _ in range(2):
        circuit.acquire().finish(upstream())
    assert circuit.state.value == "open"
    with pytest.raises(BridgeError) as caught:
        circuit.acquire()
    assert caught.value.code is ErrorCode.OVERLOADED
    assert caught.value.details["circuit_state"] == "open"
    assert 0 < caught.value.details["retry_after_ms"] <= 20
    clock.now += 0.025
    probe = circuit.acquire()
    assert circuit.state.value == "half_open"
    probe.finish(None)
    assert circuit.state.value == "closed"
    snapshot = circuit.snapshot()
    assert snapshot["rejected_calls"] == 1 and snapshot["transitions"] == 3


def test_slow_success_and_request_errors_do_not_open_the_circuit() -> None:
    clock = Clock()
    circuit = breaker(clock)
    for error in (
        BridgeError.safety_rejected("no"),
        BridgeError.invalid_request("bad"),
        BridgeError(ErrorCode.CANCELLED, "gone"),
    ):
        circuit.acquire().finish(error)
    permit = circuit.acquire()
    clock.now += 0.03  # a slow success is still healthy
    permit.finish(None)
    assert circuit.state.value == "closed"


def test_stale_closed_permit_cannot_contaminate_a_recovered_epoch() -> None:
    clock = Clock()
    circuit = CircuitBreaker("p", BreakerConfig(failure_threshold=1, open_duration_ms=5), clock)
    stale = circuit.acquire()
    circuit.acquire().finish(upstream())
    assert circuit.state.value == "open"
    clock.now += 0.01
    circuit.acquire().finish(None)
    assert circuit.state.value == "closed"
    stale.finish(upstream())
    assert circuit.state.value == "closed"
    assert circuit.snapshot()["consecutive_failures"] == 0


def test_concurrent_half_open_probes_settle_before_closing() -> None:
    clock = Clock()
    circuit = breaker(clock, half_open_max_calls=2)
    for _ in range(2):
        circuit.acquire().finish(upstream())
    clock.now += 0.025
    first, second = circuit.acquire(), circuit.acquire()
    with pytest.raises(BridgeError) as caught:
        circuit.acquire()
    assert caught.value.details["circuit_state"] == "half_open"
    first.finish(None)
    assert circuit.state.value == "half_open"
    second.finish(upstream())
    assert circuit.state.value == "open"


def test_neutral_errors_do_not_reset_the_count() -> None:
    circuit = breaker(Clock())
    circuit.acquire().finish(upstream())
    circuit.acquire().finish(BridgeError.invalid_request("bad"))
    circuit.acquire().finish(upstream())
    assert circuit.state.value == "open"


def test_quota_exhaustion_is_not_a_provider_failure() -> None:
    circuit = breaker(Clock())
    quota = BridgeError(ErrorCode.RATE_LIMITED, "quota", details={"quota_exhausted": True})
    for _ in range(5):
        circuit.acquire().finish(quota.copy())
    assert circuit.state.value == "closed"
    for _ in range(2):
        circuit.acquire().finish(BridgeError(ErrorCode.RATE_LIMITED, "slow down"))
    assert circuit.state.value == "open"


def test_caller_cancellation_frees_a_half_open_probe() -> None:
    clock = Clock()
    circuit = breaker(clock)
    for _ in range(2):
        circuit.acquire().finish(upstream())
    clock.now += 0.025
    circuit.acquire().finish(BridgeError(ErrorCode.CANCELLED, "client left"))
    assert circuit.state.value == "half_open"
    circuit.acquire().finish(None)
    assert circuit.state.value == "closed"


def test_unknown_outcome_failures_count() -> None:
    circuit = breaker(Clock())
    for _ in range(2):
        circuit.acquire().finish(upstream().mark_unknown_outcome())
    assert circuit.state.value == "open"


def test_disabled_breaker_always_permits() -> None:
    circuit = CircuitBreaker("p", BreakerConfig(enabled=False))
    for _ in range(10):
        circuit.acquire().finish(upstream())
    assert circuit.state.value == "closed"
