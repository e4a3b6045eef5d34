"""The bridge's one error type and its wire mapping.

Every layer raises :class:`BridgeError`. The server turns it into the OpenAI-style
envelope with :func:`error_envelope`; the HTTP status, the OpenAI ``type`` and the
OpenAI ``code`` for each native code live in one table, :data:`ERROR_TABLE`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

__all__ = [
    "ERROR_TABLE",
    "BridgeError",
    "ErrorCode",
    "ErrorSpec",
    "error_envelope",
    "retry_after_seconds",
]


class ErrorCode(StrEnum):
    """Stable native error codes (``imagegen_bridge.code`` on the wire)."""

    INVALID_REQUEST = "invalid_request"
    UNSUPPORTED_CAPABILITY = "unsupported_capability"
    CONFIGURATION = "configuration"
    AUTHENTICATION = "authentication"
    PERMISSION_DENIED = "permission_denied"
    SAFETY_REJECTED = "safety_rejected"
    RATE_LIMITED = "rate_limited"
    OVERLOADED = "overloaded"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    UPSTREAM = "upstream"
    PROTOCOL = "protocol"
    INPUT = "input"
    ARTIFACT = "artifact"
    SESSION = "session"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    """How one native code appears on the wire, and how a caller can recover."""

    http_status: int
    openai_type: str
    openai_code: str
    suggestions: tuple[str, ...]


ERROR_TABLE: Mapping[ErrorCode, ErrorSpec] = {
    ErrorCode.INVALID_REQUEST: ErrorSpec(
        422,
        "invalid_request_error",
        "invalid_request",
        (
            "Check the field named in the error details against "
            "`imagegen-bridge providers capabilities`.",
        ),
    ),
    ErrorCode.UNSUPPORTED_CAPABILITY: ErrorSpec(
        400,
        "invalid_request_error",
        "unsupported_capability",
        (
            "Run `imagegen-bridge providers capabilities --json` and remove parameters "
            "the provider does not support, or use compatibility `normalize`.",
        ),
    ),
    ErrorCode.CONFIGURATION: ErrorSpec(
        500,
        "api_error",
        "configuration",
        (
            "Run `imagegen-bridge config check` to find the invalid setting.",
            "Run `imagegen-bridge doctor` to check providers and storage.",
        ),
    ),
    ErrorCode.AUTHENTICATION: ErrorSpec(
        401,
        "authentication_error",
        "authentication_required",
        ("Check the credentials with `imagegen-bridge doctor`; for Codex run `codex login`.",),
    ),
    ErrorCode.PERMISSION_DENIED: ErrorSpec(
        403,
        "permission_denied_error",
        "permission_denied",
        ("Verify the bearer token's scope and the account's entitlement.",),
    ),
    ErrorCode.SAFETY_REJECTED: ErrorSpec(
        422,
        "image_generation_user_error",
        "moderation_blocked",
        ("Revise the prompt or input images; retrying the same request will not help.",),
    ),
    ErrorCode.RATE_LIMITED: ErrorSpec(
        429,
        "rate_limit_error",
        "rate_limited",
        ("Honor Retry-After; lower provider concurrency if rate limits persist.",),
    ),
    ErrorCode.OVERLOADED: ErrorSpec(
        503,
        "server_overloaded_error",
        "overloaded",
        (
            "Inspect `/v1/diagnostics` for queue depth and circuit-breaker state.",
            "Retry after the advertised delay or raise the configured capacity.",
        ),
    ),
    ErrorCode.TIMEOUT: ErrorSpec(
        504,
        "request_timeout_error",
        "timeout",
        (
            "Compare the timings, then raise `timeout_ms` or "
            "`runtime.default_timeout_ms` / `runtime.request.max_timeout_ms`.",
        ),
    ),
    ErrorCode.CANCELLED: ErrorSpec(
        408,
        "request_timeout_error",
        "cancelled",
        ("Retry only if the request was cancelled before it reached the provider.",),
    ),
    ErrorCode.UPSTREAM: ErrorSpec(
        502,
        "api_error",
        "upstream_error",
        (
            "Keep the request id for support, honor `retryable`, and run "
            "`imagegen-bridge doctor` if failures persist.",
        ),
    ),
    ErrorCode.PROTOCOL: ErrorSpec(
        502,
        "api_error",
        "protocol_error",
        ("The provider answered in an unexpected shape; update the bridge and retry.",),
    ),
    ErrorCode.INPUT: ErrorSpec(
        400,
        "invalid_request_error",
        "invalid_image_input",
        (
            "Verify that each input image is readable PNG, JPEG or WebP, within the "
            "size limits and below an allowed root.",
        ),
    ),
    ErrorCode.ARTIFACT: ErrorSpec(
        500,
        "api_error",
        "artifact_error",
        ("Check the artifact root's permissions, free space and configured limits.",),
    ),
    ErrorCode.SESSION: ErrorSpec(
        404,
        "invalid_request_error",
        "session_not_found",
        ("Check the session key and provider, or use an isolated session.",),
    ),
    ErrorCode.IDEMPOTENCY_CONFLICT: ErrorSpec(
        409,
        "invalid_request_error",
        "idempotency_conflict",
        ("Reuse an idempotency key only with an identical request; pick a new key otherwise.",),
    ),
    ErrorCode.INTERNAL: ErrorSpec(
        500,
        "api_error",
        "internal_error",
        ("Run `imagegen-bridge doctor`; if the problem persists, report it with the request id.",),
    ),
}


_STORAGE_FAULTS: Final = frozenset({"no_space", "io_error", "read_only"})
"""``details.reason`` of a storage fault (imagebridge.engine.storage_faults)."""
_STORAGE_AREAS: Final = frozenset({"artifacts", "database", "staging"})
"""``details.storage``: the write area a retryable storage failure names."""


class BridgeError(Exception):
    """A failure with a stable code, a safe message and machine-readable details.

    ``details`` never holds credentials, prompts or image bytes. ``suggestions`` start
    with the defaults for the code; :meth:`with_suggestion` appends unique ones.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        retryable: bool = False,
        provider: str | None = None,
        upstream_request_id: str | None = None,
        details: Mapping[str, Any] | None = None,
        suggestions: Iterable[str] | None = None,
    ) -> None:
        self.code = ErrorCode(code)
        self.message = message
        self.retryable = retryable
        self.provider = provider
        self.upstream_request_id = upstream_request_id
        self.details: dict[str, Any] = dict(details or {})
        if suggestions is None:
            self.suggestions = list(ERROR_TABLE[self.code].suggestions)
        else:
            self.suggestions = [s for s in dict.fromkeys(suggestions) if s]
        super().__init__(message)

    # -- construction helpers -------------------------------------------------------

    @classmethod
    def invalid_request(cls, message: str, **details: Any) -> BridgeError:
        return cls(ErrorCode.INVALID_REQUEST, message, details=details)

    @classmethod
    def artifact(cls, message: str, **details: Any) -> BridgeError:
        """A refused artifact: missing, altered, too large, not one, or not writable.

        Every artifact store raises it, and so does the CLI checking a saved file on disk
        (without importing the stores and their image stack)."""
        return cls(ErrorCode.ARTIFACT, message, details=details)

    @classmethod
    def unsupported(cls, message: str, **details: Any) -> BridgeError:
        return cls(ErrorCode.UNSUPPORTED_CAPABILITY, message, details=details)

    @classmethod
    def safety_rejected(cls, message: str, **details: Any) -> BridgeError:
        """A content-policy refusal: revising the prompt is the only way forward."""
        merged = {
            "safety_category": "content_policy",
            "recovery": "revise_prompt_or_inputs",
            "retry_same_request": False,
            "safety_controls_relaxed": False,
        }
        merged.update(details)
        return cls(ErrorCode.SAFETY_REJECTED, message, details=merged)

    # -- fluent modifiers (return self for chaining) --------------------------------

    def with_detail(self, key: str, value: Any) -> BridgeError:
        self.details[key] = value
        return self

    def with_provider(self, provider: str) -> BridgeError:
        if self.provider is None:
            self.provider = provider
        return self

    def with_suggestion(self, suggestion: str) -> BridgeError:
        if suggestion and suggestion not in self.suggestions:
            self.suggestions.append(suggestion)
        return self

    def mark_unknown_outcome(self) -> BridgeError:
        """The upstream call may have run: never retry or reroute this failure."""
        self.retryable = False
        self.details["outcome"] = "unknown"
        return self

    def copy(self) -> BridgeError:
        return BridgeError(
            self.code,
            self.message,
            retryable=self.retryable,
            provider=self.provider,
            upstream_request_id=self.upstream_request_id,
            details=copy.deepcopy(self.details),
            suggestions=list(self.suggestions),
        )

    # -- properties ------------------------------------------------------------------

    @property
    def outcome_unknown(self) -> bool:
        return self.details.get("outcome") == "unknown"

    @property
    def http_status(self) -> int:
        """Status from the code table, with the route-independent overrides of the contract.

        A missing job, preset, provider or API key (``details.resource``) is the caller's missing
        resource: 404, whichever route or layer raised it. A retryable storage fault
        (``details.reason`` ``no_space`` / ``io_error`` / ``read_only``) or a retryable
        failure of a store naming its area (``details.storage``: PostgreSQL away) is 503 on
        every backend, so clients may send it again (``x-should-retry: true``): nothing was
        written, nothing billed. A failure after an upstream call is never retryable
        (:meth:`mark_unknown_outcome`), so it never gets here.
        """
        if self.retryable and self._storage_refusal:
            # A write the disk refused (full, I/O error) or a database that is away, before
            # anything was billed: the server cannot take it now, and the same request may
            # be sent again later.
            return 503
        if self.details.get("storage") in _STORAGE_AREAS:
            return 500  # the store failed (the session store's own code would say 404)
        if self.code is ErrorCode.INVALID_REQUEST and self.details.get("resource") in {
            "job",
            "key",
            "preset",
            "response",
            "provider",
            "webhook_endpoint",
            "webhook_delivery",
        }:
            return 404
        return ERROR_TABLE[self.code].http_status

    @property
    def _storage_refusal(self) -> bool:
        """A storage fault (``details.reason``) or a store naming its area
        (``details.storage``), unless a lost connection left a commit unknown
        (``details.commit: "unknown"``: the write may have been applied)."""
        details = self.details
        if details.get("commit") == "unknown":
            return False
        return details.get("reason") in _STORAGE_FAULTS or details.get("storage") in _STORAGE_AREAS

    @property
    def field(self) -> str | None:
        value = self.details.get("field")
        return value if isinstance(value, str) else None

    # -- wire shapes -----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The raw ``BridgeError`` shape used in jobs, failures and readiness."""
        body: dict[str, Any] = {
            "code": self.code.value,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.provider is not None:
            body["provider"] = self.provider
        if self.upstream_request_id is not None:
            body["upstream_request_id"] = self.upstream_request_id
        if self.details:
            body["details"] = {k: self.details[k] for k in sorted(self.details)}
        if self.suggestions:
            body["suggestions"] = list(self.suggestions)
        return body

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BridgeError:
        """Rebuild an error from its raw shape; unknown codes become ``internal``."""
        raw_code = data.get("code")
        try:
            code = ErrorCode(str(raw_code))
        except ValueError:
            code = ErrorCode.INTERNAL
        details = data.get("details")
        suggestions = data.get("suggestions")
        return cls(
            code,
            str(data.get("message", "")),
            retryable=bool(data.get("retryable", False)),
            provider=data.get("provider") if isinstance(data.get("provider"), str) else None,
            upstream_request_id=(
                data.get("upstream_request_id")
                if isinstance(data.get("upstream_request_id"), str)
                else None
            ),
            details=details if isinstance(details, Mapping) else None,
            suggestions=([str(s) for s in suggestions] if isinstance(suggestions, list) else []),
        )

    def __repr__(self) -> str:
        return (
            f"BridgeError(code={self.code.value!r}, message={self.message!r}, "
            f"retryable={self.retryable!r})"
        )

    def __str__(self) -> str:
        return self.message


def error_envelope(error: BridgeError, request_id: str) -> dict[str, Any]:
    """The OpenAI-compatible envelope with the native error nested under ``imagegen_bridge``."""
    spec = ERROR_TABLE[error.code]
    native = error.to_dict()
    native.pop("message")
    return {
        "error": {
            "message": error.message,
            "type": spec.openai_type,
            "param": error.field,
            "code": spec.openai_code,
            "imagegen_bridge": native,
        },
        "request_id": request_id,
    }


def retry_after_seconds(error: BridgeError) -> int:
    """``Retry-After`` for 429/503: ceil(retry_after_ms / 1000), at least 1."""
    raw = error.details.get("retry_after_ms")
    if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
        return max(1, -(-raw // 1000))
    return 1
