"""Per-provider circuit breakers: closed, open, half-open, with epochs.

A breaker stops sending work to a provider that keeps failing, then lets a bounded number
of probes through. Each permit remembers the epoch it was issued in, so a completion that
arrives after the circuit moved on cannot contaminate the new state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["BreakerConfig", "BreakerPermit", "BreakerState", "CircuitBreaker", "classify_outcome"]

_FAILURE_CODES = frozenset(
    {
        ErrorCode.RATE_LIMITED,
        ErrorCode.OVERLOADED,
        ErrorCode.TIMEOUT,
        ErrorCode.UPSTREAM,
        ErrorCode.PROTOCOL,
    }
)


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class BreakerConfig:
    enabled: bool = True
    failure_threshold: int = 5
    open_duration_ms: int = 180_000
    half_open_max_calls: int = 1
    success_threshold: int = 1


def classify_outcome(error: BridgeError | None) -> str:
    """``healthy``, ``failure``, ``neutral`` or ``abandon`` for one finished call.

    Beyond the original: a quota 429 (the account's plan limit, ``details.quota_exhausted``)
    says nothing about the provider's health and is neutral, and a caller's cancellation
    frees a half-open probe slot instead of counting as evidence either way.
    """
    if error is None:
        return "healthy"
    if error.code is ErrorCode.CANCELLED and not error.outcome_unknown:
        return "abandon"
    if error.code is ErrorCode.RATE_LIMITED and error.details.get("quota_exhausted") is True:
        return "neutral"
    if error.code in _FAILURE_CODES:
        return "failure"
    return "neutral"


@dataclass(slots=True)
class BreakerPermit:
    breaker: CircuitBreaker
    epoch: int
    probe: bool
    settled: bool = False

    def finish(self, error: BridgeError | None) -> None:
        if not self.settled:
            self.settled = True
            self.breaker._finish(self, classify_outcome(error))

    def abandon(self) -> None:
        if not self.settled:
            self.settled = True
            self.breaker._finish(self, "abandon")


class CircuitBreaker:
    def __init__(
        self,
        provider: str,
        config: BreakerConfig,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (
            config.enabled
            and min(
                config.failure_threshold,
                config.open_duration_ms,
                config.half_open_max_calls,
                config.success_threshold,
            )
            < 1
        ):
            raise BridgeError(ErrorCode.CONFIGURATION, "circuit breaker settings must be positive")
        self.provider = provider
        self.config = config
        self._clock = clock
        self.state = BreakerState.CLOSED
        self.consecutive_failures = 0
        self._open_until = 0.0
        self._in_flight = 0
        self._successes = 0
        self._epoch = 0
        self.rejected_calls = 0
        self.transitions = 0

    def _transition(self, state: BreakerState) -> None:
        self.state = state
        self._epoch += 1
        self.transitions += 1
        self._in_flight = 0
        self._successes = 0
        if state is BreakerState.OPEN:
            self._open_until = self._clock() + self.config.open_duration_ms / 1000
        if state is BreakerState.CLOSED:
            self.consecutive_failures = 0

    def acquire(self) -> BreakerPermit:
        """A permit to call the provider, or ``overloaded`` when the circuit is open."""
        if not self.config.enabled:
            return BreakerPermit(self, -1, probe=False)
        if self.state is BreakerState.OPEN and self._clock() >= self._open_until:
            self._transition(BreakerState.HALF_OPEN)
        if self.state is BreakerState.CLOSED:
            return BreakerPermit(self, self._epoch, probe=False)
        if (
            self.state is BreakerState.HALF_OPEN
            and self._in_flight < self.config.half_open_max_calls
        ):
            self._in_flight += 1
            return BreakerPermit(self, self._epoch, probe=True)
        self.rejected_calls += 1
        if self.state is BreakerState.OPEN:
            retry_ms = max(1, int((self._open_until - self._clock()) * 1000))
        else:
            retry_ms = self.config.open_duration_ms
        raise BridgeError(
            ErrorCode.OVERLOADED,
            "provider circuit breaker is open",
            retryable=True,
            provider=self.provider,
            details={"circuit_state": self.state.value, "retry_after_ms": retry_ms},
        )

    def _finish(self, permit: BreakerPermit, outcome: str) -> None:
        if not self.config.enabled or permit.epoch != self._epoch:
            return
        if self.state is BreakerState.CLOSED:
            if outcome == "healthy":
                self.consecutive_failures = 0
            elif outcome == "failure":
                self.consecutive_failures += 1
                if self.consecutive_failures >= self.config.failure_threshold:
                    self._transition(BreakerState.OPEN)
            return
        if self.state is BreakerState.HALF_OPEN and permit.probe:
            self._in_flight = max(0, self._in_flight - 1)
            if outcome == "abandon":
                return
            if outcome == "healthy":
                self._successes += 1
                if self._successes >= self.config.success_threshold and self._in_flight == 0:
                    self._transition(BreakerState.CLOSED)
                return
            self._transition(BreakerState.OPEN)

    def snapshot(self) -> dict[str, Any]:
        open_ms = 0
        if self.state is BreakerState.OPEN:
            open_ms = max(0, int((self._open_until - self._clock()) * 1000))
        failures = (
            self.consecutive_failures
            if self.state is BreakerState.CLOSED
            else self.config.failure_threshold
        )
        return {
            "state": self.state.value,
            "consecutive_failures": failures,
            "retry_after_ms": open_ms,
            "rejected_calls": self.rejected_calls,
            "transitions": self.transitions,
        }
