"""Failed turns and failed image items → BridgeError, by codexErrorInfo (codex 0.169)."""

from __future__ import annotations

from typing import Any

import pytest

from imagebridge.contract.errors import ErrorCode
from imagebridge.providers.codex_app_server.failures import (
    CodexErrorInfo,
    classify_image_failure,
    classify_turn_error,
    parse_codex_error_info,
)


def test_both_wire_forms_of_codex_error_info_are_parsed() -> None:
    assert parse_codex_error_info("usageLimitExceeded") == CodexErrorInfo("usageLimitExceeded")
    assert parse_codex_error_info(
        {"responseTooManyFailedAttempts": {"httpStatusCode": 429}}
    ) == CodexErrorInfo("responseTooManyFailedAttempts", 429)
    assert parse_codex_error_info({"httpConnectionFailed": {"httpStatusCode": None}}) == (
        CodexErrorInfo("httpConnectionFailed", None)
    )
    assert parse_codex_error_info(None) is None
    assert parse_codex_error_info({"a": 1, "b": 2}) is None


@pytest.mark.parametrize(
    ("info", "message", "code", "retryable"),
    [
        (
            {"responseTooManyFailedAttempts": {"httpStatusCode": 429}},
            "",
            ErrorCode.RATE_LIMITED,
            True,
        ),
        ({"responseStreamConnectionFailed": {"httpStatusCode": 503}}, "", ErrorCode.UPSTREAM, True),
        ({"httpConnectionFailed": {"httpStatusCode": 401}}, "", ErrorCode.AUTHENTICATION, False),
        ({"httpConnectionFailed": {"httpStatusCode": 403}}, "", ErrorCode.PERMISSION_DENIED, False),
        ({"responseStreamDisconnected": {"httpStatusCode": 400}}, "", ErrorCode.UPSTREAM, False),
        ("usageLimitExceeded", "", ErrorCode.RATE_LIMITED, True),
        ("rateLimitExceeded", "", ErrorCode.RATE_LIMITED, True),
        ("serverOverloaded", "", ErrorCode.OVERLOADED, True),
        ("unauthorized", "", ErrorCode.AUTHENTICATION, False),
        ("cyberPolicy", "", ErrorCode.SAFETY_REJECTED, False),
        ("modelNotFound", "", ErrorCode.CONFIGURATION, False),
        ("internalServerError", "", ErrorCode.UPSTREAM, True),
        (
            "other",
            "Your request was rejected as a result of our safety system.",
            ErrorCode.SAFETY_REJECTED,
            False,
        ),
        ("other", "content_policy_violation", ErrorCode.SAFETY_REJECTED, False),
        ("other", "You've hit your usage limit.", ErrorCode.RATE_LIMITED, True),
        ("other", "stream disconnected", ErrorCode.UPSTREAM, False),
        (None, "", ErrorCode.UPSTREAM, False),
    ],
)
def test_turn_errors_are_classified(
    info: Any, message: str, code: ErrorCode, retryable: bool
) -> None:
    error = classify_turn_error(
        {"message": message, "codexErrorInfo": info}, status="failed", diagnostics={"n": 1}
    )
    assert error.code is code
    assert error.retryable is retryable
    assert error.details["terminal_status"] == "failed"
    assert error.details["turn_diagnostics"] == {"n": 1}
    if message:  # kept beside the bridge's own wording, never inside it
        assert error.details["upstream_message"] == message
        assert message not in error.message
    else:
        assert "upstream_message" not in error.details


def test_status_and_kind_are_kept_as_details() -> None:
    error = classify_turn_error(
        {
            "message": "x",
            "codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 429}},
        },
        status="failed",
    )
    assert error.details["upstream_code"] == "responseTooManyFailedAttempts"
    assert error.details["upstream_status"] == 429


def test_safety_rejections_carry_the_recovery_details() -> None:
    error = classify_turn_error({"message": "blocked by moderation"}, status="failed")
    assert error.code is ErrorCode.SAFETY_REJECTED
    assert error.details["safety_category"] == "content_policy"
    assert error.details["retry_same_request"] is False


def test_the_upstream_message_is_cleaned_and_bounded() -> None:
    token = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.c2ln"
    error = classify_turn_error(
        {"message": f"\x1b[31mboom\x1b[0m\nAuthorization: Bearer {token} " + "x " * 600},
        status="failed",
    )
    kept = error.details["upstream_message"]
    assert kept.startswith("boom Authorization: <redacted>")
    assert token not in kept and "\x1b" not in kept and "\n" not in kept
    assert len(kept) == 512 and kept.endswith("…")


def test_image_usage_limit_gives_retry_information() -> None:
    error = classify_image_failure(
        {"type": "usageLimitExceeded", "limitId": "images", "resetsAt": 1_000_090},
        now=lambda: 1_000_000.0,
    )
    assert error is not None
    assert error.code is ErrorCode.RATE_LIMITED
    assert error.retryable
    assert error.details["retry_after_ms"] == 90_000
    assert error.details["resets_at"] == 1_000_090
    assert error.details["limit_id"] == "images"


def test_image_failure_without_reset_time_or_type() -> None:
    error = classify_image_failure({"type": "usageLimitExceeded", "limitId": "x"})
    assert error is not None and "retry_after_ms" not in error.details
    assert classify_image_failure(None) is None
    assert classify_image_failure({}) is None
    other = classify_image_failure({"type": "somethingNew"})
    assert other is not None and other.code is ErrorCode.UPSTREAM
