"""Map codex turn failures and failed image items to :class:`BridgeError`.

Current codex (0.169) reports a failed turn as ``TurnError {message, codexErrorInfo,
additionalDetails}``: the ``codexErrorInfo`` is either a camelCase string
(``usageLimitExceeded``, ``serverOverloaded`` …) or a one-key object carrying the
upstream HTTP status (``{"responseTooManyFailedAttempts": {"httpStatusCode": 429}}``).
Content-policy refusals arrive as ``other`` with only the upstream's message to tell
them apart, so that message is *scanned* for safety wording (a text match: "safety
system", "content policy", "moderation" …). The error's own message is the bridge's
fixed wording; the upstream's message is kept beside it, cleaned and bounded by
:func:`upstream_message`, as ``details.upstream_message`` — often the only hint of why.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.shared import upstream_message

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


@dataclass(frozen=True, slots=True)
class _Failure:
    """One row of the tables below: the bridge's own wording for a kind of failure."""

    code: ErrorCode
    message: str
    retryable: bool = False
    limit: str | None = None
    """Which limit was hit (``details.limit``), for the rate-limit rows."""
    suggestions: tuple[str, ...] | None = None
    """``None``: the error code's standard suggestions."""

    def error(self, details: Mapping[str, Any]) -> BridgeError:
        merged = {**details, "limit": self.limit} if self.limit is not None else dict(details)
        if self.limit == "usage":  # the plan's quota, as the HTTP transports mark it
            merged["quota_exhausted"] = True
        if self.code is ErrorCode.SAFETY_REJECTED:
            return BridgeError.safety_rejected(self.message, **merged)
        return BridgeError(
            self.code,
            self.message,
            retryable=self.retryable,
            details=merged,
            suggestions=self.suggestions,
        )


_UNAUTHORIZED = _Failure(ErrorCode.AUTHENTICATION, "Codex rejected the login credentials")
_RATE_LIMITED = _Failure(ErrorCode.RATE_LIMITED, "Codex is rate limiting requests", retryable=True)
_USAGE_LIMIT = _Failure(
    ErrorCode.RATE_LIMITED,
    "the Codex usage limit of this account is reached",
    retryable=True,
    limit="usage",
)
_BACKEND_FAILED = _Failure(ErrorCode.UPSTREAM, "the Codex backend failed", retryable=True)
_USAGE_POLICY = _Failure(
    ErrorCode.SAFETY_REJECTED, "Codex rejected the request under its usage policy"
)
_CONTENT_POLICY = _Failure(
    ErrorCode.SAFETY_REJECTED, "Codex rejected the request under its content policy"
)
_TURN_FAILED = _Failure(ErrorCode.UPSTREAM, "the Codex turn failed")

_BY_STATUS: dict[int, _Failure] = {
    401: _UNAUTHORIZED,
    403: _Failure(ErrorCode.PERMISSION_DENIED, "Codex refused access to image generation"),
    408: _Failure(ErrorCode.TIMEOUT, "the Codex backend timed out"),
    413: _Failure(ErrorCode.INPUT, "the request was too large for Codex"),
    429: _RATE_LIMITED,
}
"""The Responses-transport status table, shared for consistency."""
_OTHER_STATUS = _Failure(ErrorCode.UPSTREAM, "the Codex backend rejected the turn")

_BY_KIND: dict[str, _Failure] = {
    "usageLimitExceeded": _USAGE_LIMIT,
    "rateLimitExceeded": _RATE_LIMITED,
    "sessionBudgetExceeded": _Failure(
        ErrorCode.RATE_LIMITED, "the Codex session budget is exhausted", limit="session_budget"
    ),
    "serverOverloaded": _Failure(
        ErrorCode.OVERLOADED, "the Codex backend is overloaded", retryable=True
    ),
    "policyCapacityUnavailable": _Failure(
        ErrorCode.OVERLOADED, "Codex has no capacity for this request right now", retryable=True
    ),
    "flexUnavailable": _Failure(
        ErrorCode.OVERLOADED, "the Codex flex tier is unavailable", retryable=True
    ),
    "unauthorized": _UNAUTHORIZED,
    "inferenceHookDenied": _Failure(
        ErrorCode.PERMISSION_DENIED, "the workspace's inference hook denied this request"
    ),
    "cyberPolicy": _USAGE_POLICY,
    "misalignmentPolicyViolation": _USAGE_POLICY,
    "modelNotFound": _Failure(
        ErrorCode.CONFIGURATION,
        "the configured Codex model was not found",
        suggestions=("Check providers.codex_app_server.codex_model.",),
    ),
    "internalServerError": _BACKEND_FAILED,
    "contextWindowExceeded": _Failure(
        ErrorCode.UPSTREAM, "the Codex thread is out of context window; start a new session"
    ),
}
"""``codexErrorInfo`` kinds with a meaning of their own; others fall back to the status."""


def _from_status(status: int) -> _Failure:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return _BACKEND_FAILED if status >= 500 else _OTHER_STATUS


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
    kept = upstream_message(message)
    if kept is not None:
        details["upstream_message"] = kept
    return _classify(info, message).error(details)


def _classify(info: CodexErrorInfo | None, message: str) -> _Failure:
    if _looks_like(message, _SAFETY_WORDS):
        return _CONTENT_POLICY
    if info is not None:
        if info.kind in _BY_KIND:
            return _BY_KIND[info.kind]
        if info.http_status is not None:
            return _from_status(info.http_status)
    if _looks_like(message, _USAGE_WORDS):
        return _USAGE_LIMIT
    if _looks_like(message, _RATE_WORDS):
        return _RATE_LIMITED
    return _TURN_FAILED


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
    details: dict[str, Any] = {
        "upstream_code": "usageLimitExceeded",
        "limit": "image_usage",
        "quota_exhausted": True,
    }
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
