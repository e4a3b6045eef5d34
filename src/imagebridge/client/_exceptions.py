"""The SDK's one exception, :class:`BridgeAPIError`, and how every failure becomes one.

``BridgeAPIError`` is a :class:`~imagebridge.contract.errors.BridgeError`, so code that
catches ``BridgeError`` around the engine catches the SDK's failures too. Beyond the
bridge's own fields (``code``, ``message``, ``retryable``, ``details``, ``suggestions``,
``provider``) it carries what only HTTP knows::

    BridgeError
    └── BridgeAPIError   status_code, request_id, retry_after, param, error_type, error_code
        ├─ from an error envelope        (any non-2xx answer, or an SSE ``error`` event)
        ├─ from a bare HTTP status       (a proxy's page: code chosen from the status)
        ├─ connection failures           (never sent: ``upstream``, retryable)
        ├─ failures after sending        (``outcome: unknown`` unless the request was safe)
        └─ protocol problems             (malformed or oversized answers: ``protocol``)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import httpx
from pydantic import ValidationError

from imagebridge.client._headers import header_request_id, parse_retry_after
from imagebridge.contract.envelope import ErrorEnvelope
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "BridgeAPIError",
    "connection_error",
    "error_from_envelope",
    "error_from_response",
    "protocol_error",
    "sent_request_error",
    "too_large_error",
]

_CONNECT_SUGGESTION = (
    "Start a bridge with `imagegen-bridge serve`, or check the base URL "
    "(argument or IMAGEGEN_BRIDGE_URL)."
)
_STATUS_CODES: Mapping[int, ErrorCode] = {
    400: ErrorCode.INVALID_REQUEST,
    401: ErrorCode.AUTHENTICATION,
    403: ErrorCode.PERMISSION_DENIED,
    404: ErrorCode.INVALID_REQUEST,
    408: ErrorCode.TIMEOUT,
    409: ErrorCode.IDEMPOTENCY_CONFLICT,
    413: ErrorCode.INVALID_REQUEST,
    422: ErrorCode.INVALID_REQUEST,
    429: ErrorCode.RATE_LIMITED,
    503: ErrorCode.OVERLOADED,
    504: ErrorCode.TIMEOUT,
}
_REJECTED_BEFORE_WORK = frozenset({429, 503})
"""Statuses a proxy or server uses when it refused the request without acting on it."""


class BridgeAPIError(BridgeError):
    """A failed call to a bridge: the bridge's error plus what HTTP adds.

    ``status_code`` is ``None`` when no HTTP answer arrived. ``retry_after`` is the
    ``Retry-After`` header in seconds (``None`` when absent). ``request_id`` is the
    envelope's ``request_id`` or the ``x-request-id`` header.
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
        status_code: int | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        param: str | None = None,
        error_type: str | None = None,
        error_code: str | None = None,
    ) -> None:
        super().__init__(
            code,
            message,
            retryable=retryable,
            provider=provider,
            upstream_request_id=upstream_request_id,
            details=details,
            suggestions=suggestions,
        )
        self.status_code = status_code
        self.request_id = request_id
        self.retry_after = retry_after
        self.param = param
        self.error_type = error_type
        self.error_code = error_code

    @classmethod
    def wrap(
        cls,
        error: BridgeError,
        *,
        status_code: int | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        param: str | None = None,
        error_type: str | None = None,
        error_code: str | None = None,
    ) -> BridgeAPIError:
        """The same failure with its HTTP context attached."""
        return cls(
            error.code,
            error.message,
            retryable=error.retryable,
            provider=error.provider,
            upstream_request_id=error.upstream_request_id,
            details=error.details,
            suggestions=error.suggestions,
            status_code=status_code,
            request_id=request_id,
            retry_after=retry_after,
            param=param,
            error_type=error_type,
            error_code=error_code,
        )

    def copy(self) -> BridgeAPIError:
        return BridgeAPIError.wrap(
            super().copy(),
            status_code=self.status_code,
            request_id=self.request_id,
            retry_after=self.retry_after,
            param=self.param,
            error_type=self.error_type,
            error_code=self.error_code,
        )

    def __repr__(self) -> str:
        return (
            f"BridgeAPIError(code={self.code.value!r}, message={self.message!r}, "
            f"status_code={self.status_code!r}, retryable={self.retryable!r}, "
            f"request_id={self.request_id!r})"
        )


def error_from_envelope(
    envelope: ErrorEnvelope,
    *,
    status_code: int | None,
    headers: httpx.Headers | None = None,
) -> BridgeAPIError:
    """The bridge's own error, exactly as it described it."""
    retry_after = parse_retry_after(headers.get("retry-after")) if headers is not None else None
    return BridgeAPIError.wrap(
        envelope.to_error(),
        status_code=status_code,
        request_id=envelope.request_id or header_request_id(headers),
        retry_after=retry_after,
        param=envelope.error.param,
        error_type=envelope.error.type,
        error_code=envelope.error.code,
    )


def error_from_response(
    status_code: int, headers: httpx.Headers, body: bytes, *, safe: bool
) -> BridgeAPIError:
    """A non-2xx answer: its error envelope, or a code chosen from the status.

    A bare 502/504 from something in front of the bridge may hide a request that ran:
    unless the request has no side effects (``safe``) its outcome is reported as unknown.
    """
    try:
        envelope = ErrorEnvelope.model_validate_json(body)
    except (ValidationError, ValueError):
        envelope = None
    if envelope is not None:
        return error_from_envelope(envelope, status_code=status_code, headers=headers)
    code = _STATUS_CODES.get(status_code, ErrorCode.UPSTREAM)
    error = BridgeAPIError(
        code,
        f"the bridge answered HTTP {status_code} without an error envelope",
        retryable=status_code in _REJECTED_BEFORE_WORK or (safe and status_code >= 500),
        details={"status": status_code},
        status_code=status_code,
        request_id=header_request_id(headers),
        retry_after=parse_retry_after(headers.get("retry-after")),
    )
    if status_code >= 500 and status_code not in _REJECTED_BEFORE_WORK and not safe:
        error.mark_unknown_outcome()
    return error


def connection_error(url: str, exc: Exception) -> BridgeAPIError:
    """The request never left this machine: always safe to send again."""
    del exc  # the cause is chained by the caller; its text may name local details
    return BridgeAPIError(
        ErrorCode.UPSTREAM,
        "could not connect to the bridge",
        retryable=True,
        details={"url": url},
        suggestions=[_CONNECT_SUGGESTION],
    )


def sent_request_error(url: str, exc: Exception, *, safe: bool) -> BridgeAPIError:
    """The connection failed after the request was sent, before the answer arrived.

    Only a request without side effects (``safe``: GET) may simply be sent again; for
    anything else the bridge may have acted on it, so the outcome is unknown.
    """
    timed_out = isinstance(exc, httpx.TimeoutException)
    error = BridgeAPIError(
        ErrorCode.TIMEOUT if timed_out else ErrorCode.UPSTREAM,
        (
            "the bridge did not answer before the client's read timeout"
            if timed_out
            else "the connection to the bridge failed before its answer arrived"
        ),
        retryable=safe,
        details={"url": url},
        suggestions=(
            [
                "Raise the client's read timeout, or use durable jobs (client.jobs.create) "
                "for long generations."
            ]
            if timed_out
            else None
        ),
    )
    if not safe:
        error.mark_unknown_outcome()
    return error


def protocol_error(
    message: str,
    *,
    status_code: int | None = None,
    headers: httpx.Headers | None = None,
    **details: Any,
) -> BridgeAPIError:
    """The bridge answered, but not in the shape the contract promises."""
    return BridgeAPIError(
        ErrorCode.PROTOCOL,
        message,
        details=details or None,
        status_code=status_code,
        request_id=header_request_id(headers),
    )


def too_large_error(
    limit: int, *, status_code: int | None = None, headers: httpx.Headers | None = None
) -> BridgeAPIError:
    error = protocol_error(
        "the bridge's answer exceeds the client's response size limit",
        status_code=status_code,
        headers=headers,
        maximum_bytes=limit,
    )
    error.suggestions = [
        "Raise max_response_bytes, or ask for response_format 'artifact' and download "
        "images one by one with client.artifacts.get()."
    ]
    return error
