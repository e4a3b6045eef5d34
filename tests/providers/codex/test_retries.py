"""The transient retry rule: which failures may be repeated, and after how long."""

from __future__ import annotations

import asyncio

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.cancellation import CancelToken
from imagebridge.providers.codex.retries import TransientRetryPolicy, sleep_unless_cancelled

POLICY = TransientRetryPolicy(max_attempts=2, backoff_ms=750)


def failure(
    code: ErrorCode = ErrorCode.UPSTREAM, retryable: bool = True, **details: object
) -> BridgeError:
    return BridgeError(code, "failed", retryable=retryable, details=details)


def delay(
    error: BridgeError, attempt: int = 1, *, output_seen: bool = False, remaining: float = 60.0
) -> float | None:
    return POLICY.delay_before_next(error, attempt, output_seen=output_seen, remaining_s=remaining)


@pytest.mark.parametrize("code", [ErrorCode.UPSTREAM, ErrorCode.OVERLOADED, ErrorCode.RATE_LIMITED])
def test_retryable_transient_codes_wait_the_linear_backoff(code: ErrorCode) -> None:
    assert delay(failure(code)) == 0.75


@pytest.mark.parametrize(
    ("error", "why"),
    [
        (failure(retryable=False), "not retryable"),
        (failure(ErrorCode.TIMEOUT), "timeout is not a transient code"),
        (failure(ErrorCode.AUTHENTICATION), "authentication"),
        (failure().mark_unknown_outcome(), "unknown outcome"),
        (failure(ErrorCode.RATE_LIMITED, quota_exhausted=True), "plan quota"),
        (failure(ErrorCode.RATE_LIMITED, retry_after_ms=5_000), "asks for a longer wait"),
    ],
)
def test_these_failures_are_never_retried(error: BridgeError, why: str) -> None:
    assert delay(error) is None, why


def test_a_short_retry_after_is_within_the_backoff() -> None:
    assert delay(failure(ErrorCode.RATE_LIMITED, retry_after_ms=500)) == 0.75


def test_no_retry_after_output_the_last_attempt_or_without_time() -> None:
    assert delay(failure(), output_seen=True) is None
    assert delay(failure(), attempt=2) is None
    assert delay(failure(), remaining=0.75) is None
    assert (
        TransientRetryPolicy(max_attempts=1).delay_before_next(
            failure(), 1, output_seen=False, remaining_s=60
        )
        is None
    )


@pytest.mark.parametrize(("attempts", "backoff"), [(0, 750), (3, 750), (2, 30_001), (2, -1)])
def test_out_of_range_settings_are_a_configuration_error(attempts: int, backoff: int) -> None:
    with pytest.raises(BridgeError) as caught:
        TransientRetryPolicy(max_attempts=attempts, backoff_ms=backoff)
    assert caught.value.code is ErrorCode.CONFIGURATION


async def test_sleep_stops_when_cancelled() -> None:
    token = CancelToken()
    asyncio.get_running_loop().call_later(0.02, token.cancel)
    started = asyncio.get_running_loop().time()

    assert await sleep_unless_cancelled(10.0, token) is False
    assert asyncio.get_running_loop().time() - started < 2.0
    assert await sleep_unless_cancelled(0.01, CancelToken()) is True
