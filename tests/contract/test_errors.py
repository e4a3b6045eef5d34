from __future__ import annotations

from typing import Any

import pytest

from imagebridge.contract import ERROR_TABLE, BridgeError, ErrorCode, error_envelope
from imagebridge.contract.errors import retry_after_seconds

EXPECTED = {
    "invalid_request": (422, "invalid_request_error", "invalid_request"),
    "unsupported_capability": (400, "invalid_request_error", "unsupported_capability"),
    "configuration": (500, "api_error", "configuration"),
    "authentication": (401, "authentication_error", "authentication_required"),
    "permission_denied": (403, "permission_denied_error", "permission_denied"),
    "safety_rejected": (422, "image_generation_user_error", "moderation_blocked"),
    "rate_limited": (429, "rate_limit_error", "rate_limited"),
    "overloaded": (503, "server_overloaded_error", "overloaded"),
    "timeout": (504, "request_timeout_error", "timeout"),
    "cancelled": (408, "request_timeout_error", "cancelled"),
    "upstream": (502, "api_error", "upstream_error"),
    "protocol": (502, "api_error", "protocol_error"),
    "input": (400, "invalid_request_error", "invalid_image_input"),
    "artifact": (500, "api_error", "artifact_error"),
    "session": (404, "invalid_request_error", "session_not_found"),
    "idempotency_conflict": (409, "invalid_request_error", "idempotency_conflict"),
    "internal": (500, "api_error", "internal_error"),
}


@pytest.mark.parametrize(("code", "expected"), sorted(EXPECTED.items()))
def test_error_table_maps_every_code(code: str, expected: tuple[int, str, str]) -> None:
    spec = ERROR_TABLE[ErrorCode(code)]
    assert (spec.http_status, spec.openai_type, spec.openai_code) == expected
    assert spec.suggestions, "every code carries at least one default suggestion"


def test_table_covers_exactly_the_error_codes() -> None:
    assert set(ERROR_TABLE) == set(ErrorCode)


def test_envelope_shape_and_param_from_field() -> None:
    error = BridgeError.unsupported("quality is not supported", field="parameters.quality")
    error.provider = "mock"
    envelope = error_envelope(error, "req-1")
    assert envelope["request_id"] == "req-1"
    body = envelope["error"]
    assert body["param"] == "parameters.quality"
    assert body["type"] == "invalid_request_error"
    assert body["code"] == "unsupported_capability"
    native = body["imagegen_bridge"]
    assert native["code"] == "unsupported_capability"
    assert native["retryable"] is False
    assert native["provider"] == "mock"
    assert native["details"] == {"field": "parameters.quality"}
    assert "message" not in native


def test_envelope_param_is_null_without_string_field() -> None:
    error = BridgeError.invalid_request("request validation failed", issues=[])
    assert error_envelope(error, "r")["error"]["param"] is None


def test_resource_not_found_maps_to_404() -> None:
    assert (
        BridgeError.invalid_request("durable job was not found", resource="job").http_status == 404
    )
    assert BridgeError.invalid_request("bad").http_status == 422


def test_an_unknown_provider_is_a_missing_resource() -> None:
    missing = BridgeError.invalid_request(
        "requested provider is not registered", resource="provider", provider="nope"
    )
    assert missing.http_status == 404
    assert BridgeError.from_dict(missing.to_dict()).http_status == 404
    for other in ("preset_record", "artifact", 7):
        assert BridgeError.invalid_request("bad", resource=other).http_status == 422
    elsewhere = BridgeError(ErrorCode.CONFIGURATION, "x", details={"resource": "provider"})
    assert elsewhere.http_status == 500


def test_unknown_outcome_forces_non_retryable() -> None:
    error = BridgeError(ErrorCode.TIMEOUT, "deadline", retryable=True).mark_unknown_outcome()
    assert error.retryable is False
    assert error.outcome_unknown


def test_raw_shape_round_trips() -> None:
    error = BridgeError(
        ErrorCode.RATE_LIMITED,
        "slow down",
        retryable=True,
        provider="codex-responses",
        upstream_request_id="up-1",
        details={"retry_after_ms": 1500},
    )
    again = BridgeError.from_dict(error.to_dict())
    assert again.to_dict() == error.to_dict()


def test_safety_rejection_details() -> None:
    error = BridgeError.safety_rejected("blocked")
    assert error.details["safety_category"] == "content_policy"
    assert error.details["retry_same_request"] is False


@pytest.mark.parametrize(
    ("retry_after_ms", "expected"),
    [(None, 1), (1, 1), (999, 1), (1000, 1), (1001, 2), (180_001, 181)],
)
def test_retry_after_seconds(retry_after_ms: int | None, expected: int) -> None:
    details = {} if retry_after_ms is None else {"retry_after_ms": retry_after_ms}
    error = BridgeError(ErrorCode.OVERLOADED, "busy", details=details)
    assert retry_after_seconds(error) == expected


def test_suggestions_are_unique_and_appendable() -> None:
    error = BridgeError(ErrorCode.AUTHENTICATION, "login", suggestions=["a", "a", "", "b"])
    assert error.suggestions == ["a", "b"]
    error.with_suggestion("a").with_suggestion("c")
    assert error.suggestions == ["a", "b", "c"]


def test_a_retryable_storage_fault_is_503_and_a_billed_one_keeps_its_code_status() -> None:
    full_db = BridgeError(
        ErrorCode.INTERNAL,
        "durable job database could not be written",
        retryable=True,
        details={"reason": "no_space", "storage": "database"},
    )
    assert full_db.http_status == 503
    billed = BridgeError(
        ErrorCode.ARTIFACT, "could not write artifact", details={"reason": "no_space"}
    )
    assert billed.http_status == 500
    busy = BridgeError(ErrorCode.INTERNAL, "busy", retryable=True, details={"reason": "locked"})
    assert busy.http_status == 500


def test_a_database_away_is_503_unless_a_commit_was_lost_or_an_upstream_call_ran() -> None:
    def away(**details: Any) -> BridgeError:
        return BridgeError(
            ErrorCode.SESSION,
            "session database is unavailable",
            retryable=True,
            details={"reason": "connection refused", "storage": "database", **details},
        )

    assert away().http_status == 503  # not the session code's 404: nothing was written
    assert away(commit="unknown").http_status == 500  # the write may have landed
    assert away().mark_unknown_outcome().http_status == 500  # after a provider call
    not_retryable = BridgeError(ErrorCode.INTERNAL, "x", details={"storage": "database"})
    assert not_retryable.http_status == 500
