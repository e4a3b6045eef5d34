"""Every upstream fault, through the whole engine, for both Codex HTTP providers.

Each case drives ``ImageRuntime.execute`` (fan-out decorator, breaker, materializer) at
the loopback mock over real HTTP and pins what a caller sees: the error code, the HTTP
status it maps to, ``retryable``, ``details.outcome`` and the exact number of upstream
calls. Every fault is scripted three times, so a provider that retried more than it may
would show an extra call (and a fault that should not be retried, a second one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from imagebridge.contract.errors import ErrorCode
from tests.support.codex_backend import CodexBridge, Route

ROUTES: dict[str, Route] = {"codex-responses": "responses", "codex-images": "images_generations"}


@dataclass(frozen=True)
class Fault:
    kind: str
    code: ErrorCode
    status: int
    retryable: bool
    unknown: bool
    calls: int
    details: dict[str, Any] = field(default_factory=dict)
    timeout_ms: int | None = None


def fault(kind: str, code: ErrorCode, status: int, **kw: Any) -> Fault:
    return Fault(
        kind,
        code,
        status,
        retryable=kw.pop("retryable", False),
        unknown=kw.pop("unknown", False),
        calls=kw.pop("calls", 1),
        **kw,
    )


COMMON = [
    fault("http_401", ErrorCode.AUTHENTICATION, 401, details={"http_status": 401}),
    fault("http_403", ErrorCode.PERMISSION_DENIED, 403, details={"http_status": 403}),
    fault(
        "http_429",
        ErrorCode.RATE_LIMITED,
        429,
        retryable=True,
        details={"http_status": 429, "quota_exhausted": True},
    ),
    fault(
        "http_500",
        ErrorCode.UPSTREAM,
        502,
        retryable=True,
        calls=2,
        details={"http_status": 500, "provider_attempts": 2},
    ),
    fault(
        "http_502",
        ErrorCode.UPSTREAM,
        502,
        retryable=True,
        calls=2,
        details={"http_status": 502, "provider_attempts": 2},
    ),
    fault(
        "http_503",
        ErrorCode.UPSTREAM,
        502,
        retryable=True,
        calls=2,
        details={"http_status": 503, "upstream_code": "server_is_overloaded"},
    ),
    fault("stall", ErrorCode.TIMEOUT, 504, unknown=True, timeout_ms=700),
    fault("disconnect_before_first_byte", ErrorCode.UPSTREAM, 502, unknown=True),
    fault("disconnect_mid_stream", ErrorCode.UPSTREAM, 502, unknown=True),
    fault("malformed_json", ErrorCode.PROTOCOL, 502, unknown=True),
    fault(
        "completed_without_image",
        ErrorCode.UPSTREAM,
        502,
        retryable=True,
        calls=2,
        details={"upstream_code": "completed_without_image", "provider_attempts": 2},
    ),
    fault(
        "usage_limit_in_stream",
        ErrorCode.RATE_LIMITED,
        429,
        retryable=True,
        details={"quota_exhausted": True},
    ),
]
RESPONSES_ONLY = [
    fault(
        "failed_image_call",
        ErrorCode.UPSTREAM,
        502,
        retryable=True,
        calls=2,
        details={"upstream_code": "image_call_failed", "image_call_statuses": ["failed"]},
    ),
    fault(
        "content_policy_refusal",
        ErrorCode.SAFETY_REJECTED,
        422,
        details={
            "upstream_code": "content_policy_violation",
            "moderation_stage": "input",
            "moderation_categories": ["violence"],
            "requested_moderation": "auto",
            "input_images_present": False,
        },
    ),
    fault(
        "refusal_message",
        ErrorCode.SAFETY_REJECTED,
        422,
        details={"upstream_code": "completed_with_refusal", "retry_same_request": False},
    ),
    fault("stall_mid_stream", ErrorCode.TIMEOUT, 504, unknown=True, timeout_ms=700),
]
IMAGES_ONLY = [
    fault(
        "failed_image_call",
        ErrorCode.UPSTREAM,
        502,
        retryable=True,
        calls=2,
        details={"http_status": 500, "upstream_code": "image_generation_failed"},
    ),
    fault(
        "content_policy_refusal",
        ErrorCode.SAFETY_REJECTED,
        422,
        details={
            "http_status": 400,
            "upstream_code": "moderation_blocked",
            "moderation_stage": "input",
            "moderation_categories": ["sexual"],
            "requested_moderation": "auto",
            "input_images_present": False,
        },
    ),
]
CASES = [
    *[pytest.param("codex-responses", f, id=f"responses-{f.kind}") for f in COMMON],
    *[pytest.param("codex-responses", f, id=f"responses-{f.kind}") for f in RESPONSES_ONLY],
    *[pytest.param("codex-images", f, id=f"images-{f.kind}") for f in COMMON],
    *[pytest.param("codex-images", f, id=f"images-{f.kind}") for f in IMAGES_ONLY],
]


@pytest.mark.parametrize(("provider", "case"), CASES)
async def test_fault_is_reported_precisely_without_duplicate_generation(
    codex_bridge: CodexBridge, provider: str, case: Fault
) -> None:
    backend = codex_bridge.backend
    route = ROUTES[provider]
    backend.script(case.kind, case.kind, case.kind, route=route)
    extra: dict[str, Any] = {}
    if case.timeout_ms is not None:
        extra["timeout_ms"] = case.timeout_ms
    started = time.monotonic()

    error = await codex_bridge.fail(routing={"provider": provider}, **extra)

    assert error.code is case.code, error.to_dict()
    assert error.http_status == case.status
    assert error.retryable is case.retryable
    assert error.details.get("outcome") == ("unknown" if case.unknown else None)
    assert error.provider == provider
    assert backend.calls(route) == case.calls
    assert sum(backend.call_counts.values()) == case.calls  # no other route was touched
    for key, value in case.details.items():
        assert error.details.get(key) == value, key
    if case.timeout_ms is not None:  # stopped at the deadline, not at the mock's 30 s stall
        assert time.monotonic() - started < backend.stall_timeout_s / 2


@pytest.mark.parametrize("provider", list(ROUTES))
async def test_quota_429_carries_the_reset_time(codex_bridge: CodexBridge, provider: str) -> None:
    backend = codex_bridge.backend
    backend.quota.limit_resets_in_s = 1_234
    backend.script("http_429", route=ROUTES[provider])
    now = time.time()

    error = await codex_bridge.fail(routing={"provider": provider})

    assert error.details["quota_exhausted"] is True
    assert abs(error.details["resets_at"] - (now + 1_234)) <= 3
    assert 1_230_000 <= error.details["retry_after_ms"] <= 1_235_000
    assert error.details["provider_attempts"] == 1


@pytest.mark.parametrize("provider", list(ROUTES))
async def test_expired_login_points_at_codex_login(
    codex_bridge: CodexBridge, provider: str
) -> None:
    codex_bridge.backend.script("http_401", route=ROUTES[provider])

    error = await codex_bridge.fail(routing={"provider": provider})

    assert error.details["upstream_code"] == "token_expired"
    assert any("codex login" in suggestion for suggestion in error.suggestions)
    assert error.upstream_request_id is not None and error.upstream_request_id.startswith("req_")
