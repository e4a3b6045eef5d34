"""Map codex turn failures and failed image items to :class:`BridgeError`.

Current codex (0.169) reports a failed turn as ``TurnError {message, codexErrorInfo,
additionalDetails}``: the ``codexErrorInfo`` is either a camelCase string
(``usageLimitExceeded``, ``serverOverloaded`` …) or a one-key object carrying the
upstream HTTP status (``{"responseTooManyFailedAttempts": {"httpStatusCode": 429}}``).
Content-policy refusals arrive as ``other`` with only the upstream's message to tell
them apart, so that message is *scanned* for safety wording — and never reflected:
the bridge's own fixed messages are used, because an upstream message may quote input.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "CodexErrorInfo",
    "classify_image_failure",
    "classify_turn_error",
    "parse_codex_error_info",
]

_SAFE_CODE = re.compile(r"[^A-Za-z0-9_-]")
_SAFETY_WORDS = (
    "safety",
    "content_policy",
    "content policy",
    "moderation",
    "refusal",
    "policy_violation",
    "policy violation",
    "violates our",
)
_USAGE_WORDS = ("usage limit", "usage_limit", "quota")
_RATE_WORDS = ("rate limit", "rate_limit", "too many requests")


@dataclass(frozen=True, slots=True)
class CodexErrorInfo:
    """The ``codexErrorInfo`` of a turn error, normalised: a kind and an HTTP status."""

    kind: str
    http_status: int | None = None


def parse_codex_error_info(value: Any) -> CodexErrorInfo | None:
    """Normalise both wire forms (string or one-key object); ``None`` when absent."""
    if isinstance(value, str) and value:
        return CodexErrorInfo(_safe(value))
    if isinstance(value, Mapping) and len(value) == 1:
        ((key, inner),) = value.items()
        status = inner.get("httpStatusCode") if isinstance(inner, Mapping) else None
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            status = None
        return CodexErrorInfo(_safe(str(key)), status)
    return None


def _safe(value: str) -> str:
    return _SAFE_CODE.sub("", value[:64]) or "other"


def _from_status(status: int, details: dict[str, Any]) -> BridgeError:
    """The Responses-transport status table (providers.md A6), shared for consistency."""
    if status == 401:
        return BridgeError(
            ErrorCode.AUTHENTICATION, "Codex rejected the login credentials", details=details
        )
    if status == 403:
        return BridgeError(
            ErrorCode.PERMISSION_DENIED, "Codex refused access to image generation", details=details
        )
    if status == 408:
        return BridgeError(ErrorCode.TIMEOUT, "the Codex backend timed out", details=details)
    if status == 413:
        return BridgeError(ErrorCode.INPUT, "the request was too large for Codex", details=details)
    if status == 429:
        return BridgeError(
            ErrorCode.RATE_LIMITED,
            "Codex is rate limiting requests",
            retryable=True,
            details=details,
        )
    if status >= 500:
        return BridgeError(
            ErrorCode.UPSTREAM,
            "the Codex backend failed",
            retryable=True,
            details=details,
        )
    return BridgeError(ErrorCode.UPSTREAM, "the Codex backend rejected the turn", details=details)


def _by_kind(kind: str, details: dict[str, Any]) -> BridgeError | None:
    factories: dict[str, Callable[[], BridgeError]] = {
        "usageLimitExceeded": lambda: BridgeError(
            ErrorCode.RATE_LIMITED,
            "the Codex usage limit of this account is reached",
            retryable=True,
            details={**details, "limit": "usage"},
        ),
        "rateLimitExceeded": lambda: BridgeError(
            ErrorCode.RATE_LIMITED,
            "Codex is rate limiting requests",
            retryable=True,
            details=details,
        ),
        "sessionBudgetExceeded": lambda: BridgeError(
            ErrorCode.RATE_LIMITED,
            "the Codex session budget is exhausted",
            details={**details, "limit": "session_budget"},
        ),
        "serverOverloaded": lambda: BridgeError(
            ErrorCode.OVERLOADED, "the Codex backend is overloaded", retryable=True, details=details
        ),
        "policyCapacityUnavailable": lambda: BridgeError(
            ErrorCode.OVERLOADED,
            "Codex has no capacity for this request right now",
            retryable=True,
            details=details,
        ),
        "flexUnavailable": lambda: BridgeError(
            ErrorCode.OVERLOADED,
            "the Codex flex tier is unavailable",
            retryable=True,
            details=details,
        ),
        "unauthorized": lambda: BridgeError(
            ErrorCode.AUTHENTICATION, "Codex rejected the login credentials", details=details
        ),
        "inferenceHookDenied": lambda: BridgeError(
            ErrorCode.PERMISSION_DENIED,
            "the workspace's inference hook denied this request",
            details=details,
        ),
        "cyberPolicy": lambda: BridgeError.safety_rejected(
            "Codex rejected the request under its usage policy", **details
        ),
        "misalignmentPolicyViolation": lambda: BridgeError.safety_rejected(
            "Codex rejected the request under its usage policy", **details
        ),
        "modelNotFound": lambda: BridgeError(
            ErrorCode.CONFIGURATION,
            "the configured Codex model was not found",
            details=details,
            suggestions=["Check providers.codex_app_server.codex_model."],
        ),
        "internalServerError": lambda: BridgeError(
            ErrorCode.UPSTREAM, "the Codex backend failed", retryable=True, details=details
        ),
        "contextWindowExceeded": lambda: BridgeError(
            ErrorCode.UPSTREAM,
            "the Codex thread is out of context window; start a new session",
            details=details,
        ),
    }
    factory = factories.get(kind)
    return factory() if factory is not None else None


def _looks_like(message: str, words: tuple[str, ...]) -> bool:
    lowered = message.lower()
    return any(word in lowered for word in words)


def classify_turn_error(
    error: Mapping[str, Any] | None,
    *,
    status: str,
    diagnostics: Mapping[str, Any] | None = None,
) -> BridgeError:
    """The error for a turn that ended ``failed`` (``error`` is its ``TurnError``)."""
    info = parse_codex_error_info(error.get("codexErrorInfo")) if error else None
    message = error.get("message") if error else None
    message = message if isinstance(message, str) else ""
    details: dict[str, Any] = {"terminal_status": _safe(status)}
    if info is not None:
        details["upstream_code"] = info.kind
        if info.http_status is not None:
            details["upstream_status"] = info.http_status
    if diagnostics:
        details["turn_diagnostics"] = dict(diagnostics)

    if _looks_like(message, _SAFETY_WORDS):
        return BridgeError.safety_rejected(
            "Codex rejected the request under its content policy", **details
        )
    if info is not None:
        known = _by_kind(info.kind, details)
        if known is not None:
            return known
        if info.http_status is not None:
            return _from_status(info.http_status, details)
    if _looks_like(message, _USAGE_WORDS):
        return BridgeError(
            ErrorCode.RATE_LIMITED,
            "the Codex usage limit of this account is reached",
            retryable=True,
            details={**details, "limit": "usage"},
        )
    if _looks_like(message, _RATE_WORDS):
        return BridgeError(
            ErrorCode.RATE_LIMITED,
            "Codex is rate limiting requests",
            retryable=True,
            details=details,
        )
    return BridgeError(ErrorCode.UPSTREAM, "the Codex turn failed", details=details)


def classify_image_failure(
    failure: Any, *, now: Callable[[], float] = time.time
) -> BridgeError | None:
    """The error carried by a failed ``imageGeneration`` item's ``failure``, if any.

    ``usageLimitExceeded`` (the only variant codex 0.169 defines) becomes
    ``rate_limited`` with ``retry_after_ms`` computed from ``resetsAt``.
    """
    if not isinstance(failure, Mapping):
        return None
    kind = failure.get("type")
    if kind != "usageLimitExceeded":
        if isinstance(kind, str) and kind:
            return BridgeError(
                ErrorCode.UPSTREAM,
                "Codex could not generate the image",
                details={"upstream_code": _safe(kind)},
            )
        return None
    details: dict[str, Any] = {"upstream_code": "usageLimitExceeded", "limit": "image_usage"}
    limit_id = failure.get("limitId")
    if isinstance(limit_id, str) and limit_id:
        details["limit_id"] = _safe(limit_id)
    resets_at = failure.get("resetsAt")
    if isinstance(resets_at, int) and not isinstance(resets_at, bool) and resets_at > 0:
        details["resets_at"] = resets_at
        wait_ms = int((resets_at - now()) * 1000)
        if wait_ms > 0:
            details["retry_after_ms"] = wait_ms
    return BridgeError(
        ErrorCode.RATE_LIMITED,
        "the image generation limit of this Codex account is reached",
        retryable=True,
        details=details,
    )
