"""The retry policy's decisions and ``Retry-After`` parsing."""

from __future__ import annotations

import email.utils

import pytest

from imagebridge.client import BridgeAPIError, ErrorCode, RetryPolicy
from imagebridge.client._headers import parse_retry_after
from imagebridge.contract.errors import BridgeError


def retryable() -> BridgeError:
    return BridgeError(ErrorCode.OVERLOADED, "busy", retryable=True)


@pytest.mark.parametrize(
    ("error", "repeatable", "attempt", "retry_after", "expected"),
    [
        (retryable(), True, 0, None, True),
        (retryable(), True, 2, None, False),  # out of tries
        (retryable(), False, 0, None, False),  # not safe to repeat
        (BridgeError(ErrorCode.UPSTREAM, "x"), True, 0, None, False),  # not retryable
        (retryable().mark_unknown_outcome(), True, 0, None, False),
        (
            BridgeError(ErrorCode.UPSTREAM, "x", retryable=True, details={"outcome": "unknown"}),
            True, 0, None, False,
        ),
        (retryable(), True, 0, 120.0, True),
        (retryable(), True, 0, 121.0, False),  # longer than the policy accepts
    ],
)  # fmt: skip
def test_should_retry(
    error: BridgeError, repeatable: bool, attempt: int, retry_after: float | None, expected: bool
) -> None:
    decision = RetryPolicy().should_retry(
        error, attempt=attempt, repeatable=repeatable, retry_after=retry_after
    )
    assert decision is expected


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=3.0)
    assert 0.75 <= policy.delay(0, None) <= 1.0
    assert 1.5 <= policy.delay(1, None) <= 2.0
    assert 2.25 <= policy.delay(5, None) <= 3.0
    assert policy.delay(3, 7.5) == 7.5


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", 1.0), ("2.5", 2.5), (" 3 ", 3.0), ("-4", 0.0), ("", None), ("soon", None),
     ("inf", None), ("nan", None), (None, None), ("9" * 100, None)],
)  # fmt: skip
def test_parse_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_parse_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    header = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after(header, now=now) == pytest.approx(30.0)
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert parse_retry_after(past, now=now) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [{"max_retries": -1}, {"max_retries": 101}, {"max_retries": True},
     {"initial_delay": -1.0}, {"max_delay": float("inf")}, {"max_retry_after": float("nan")}],
)  # fmt: skip
def test_invalid_policies_are_configuration_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.CONFIGURATION
