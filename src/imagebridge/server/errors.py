"""Turning failures into HTTP answers: one envelope, one status rule, the right headers.

Every non-2xx JSON answer is :func:`imagebridge.contract.errors.error_envelope`. The status
comes from the contract's code table (``BridgeError.http_status``) except where the server
decides it: transport-level refusals (413, 431, 404/405 routing) and the decided
deviation documented in ``docs/api-decisions.md`` for an artifact name collision (409).
An unknown provider's 404 (also a decided deviation) comes from the code table itself:
``details.resource == "provider"``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from imagebridge.contract.errors import BridgeError, ErrorCode, error_envelope, retry_after_seconds
from imagebridge.server.context import CONTEXT_KEY, RequestContext
from imagebridge.server.ids import mint_request_id

__all__ = [
    "HttpError",
    "body_too_large",
    "bridge_error_handler",
    "error_response",
    "error_status",
    "install_error_handlers",
    "json_bytes",
    "provider_not_found",
    "should_retry",
]

logger = logging.getLogger("imagebridge.server")

WWW_AUTHENTICATE = 'Bearer realm="imagegen-bridge"'
ROUTE_NOT_FOUND = "route was not found"
METHOD_NOT_ALLOWED = "HTTP method is not allowed for this route"


class HttpError(BridgeError):
    """A :class:`BridgeError` whose HTTP status is fixed by the server, not the code table."""

    def __init__(self, status: int, code: ErrorCode, message: str, **kwargs: Any) -> None:
        super().__init__(code, message, **kwargs)
        self.status = status


def body_too_large(limit: int) -> HttpError:
    return HttpError(
        413,
        ErrorCode.INVALID_REQUEST,
        "request body exceeds the byte limit",
        details={"maximum_bytes": limit},
    )


def provider_not_found(name: str | None, *, field: str | None = None) -> BridgeError:
    """An unknown provider is a missing resource (404), not a server misconfiguration."""
    details: dict[str, Any] = {"resource": "provider"}
    if name is not None:
        details["provider"] = name
    if field is not None:
        details["field"] = field
    return BridgeError(
        ErrorCode.INVALID_REQUEST, "requested provider is not registered", details=details
    )


def error_status(error: BridgeError) -> int:
    if isinstance(error, HttpError):
        return error.status
    if error.code is ErrorCode.ARTIFACT and isinstance(error.details.get("name"), str):
        return 409  # a requested artifact name is taken: the caller's conflict to resolve
    return error.http_status


def json_bytes(value: Any) -> bytes:
    """Compact UTF-8 JSON, as every JSON body and SSE data line is written."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


_SAFE_RETRY_STATUSES = frozenset({429, 503})


def should_retry(error: BridgeError, status: int) -> bool:
    """Whether a client may send the same request again (the ``x-should-retry`` header).

    Only a refusal that happened before any upstream call may be repeated: a rate limit, a
    full queue, an open circuit breaker (429/503 with ``retryable`` set). Everything else
    says ``false``: a caller mistake would fail again, and a failure after the provider was
    dispatched (``outcome: unknown``, an upstream 5xx, a failed artifact write) may have
    produced a billed image that a retry would pay for twice. OpenAI's SDKs obey this
    header before their own status rules, which would otherwise retry every 5xx.
    """
    return status in _SAFE_RETRY_STATUSES and error.retryable and not error.outcome_unknown


def error_response(
    error: BridgeError,
    request_id: str,
    *,
    headers: Mapping[str, str] | None = None,
) -> Response:
    status = error_status(error)
    extra: dict[str, str] = dict(headers or {})
    if status in (429, 503):
        extra["retry-after"] = str(retry_after_seconds(error))
    extra["x-should-retry"] = "true" if should_retry(error, status) else "false"
    if status == 401:
        extra["www-authenticate"] = WWW_AUTHENTICATE
    return Response(
        json_bytes(error_envelope(error, request_id)),
        status_code=status,
        headers=extra,
        media_type="application/json",
    )


def _request_id(scope: Scope) -> str:
    context = scope.get(CONTEXT_KEY)
    if isinstance(context, RequestContext):
        return context.request_id
    return mint_request_id()


async def bridge_error_handler(request: Request, exc: Exception) -> Response:
    """The exception handler for :class:`BridgeError`: the envelope with its status."""
    assert isinstance(exc, BridgeError)
    return error_response(exc, _request_id(request.scope))


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    headers: dict[str, str] = {}
    if exc.status_code == 404:
        error = HttpError(404, ErrorCode.INVALID_REQUEST, ROUTE_NOT_FOUND)
    elif exc.status_code == 405:
        error = HttpError(405, ErrorCode.INVALID_REQUEST, METHOD_NOT_ALLOWED)
        allow = (exc.headers or {}).get("Allow") or (exc.headers or {}).get("allow")
        if allow:
            headers["allow"] = allow
    else:
        code = ErrorCode.INTERNAL if exc.status_code >= 500 else ErrorCode.INVALID_REQUEST
        error = HttpError(exc.status_code, code, "request could not be served")
    return error_response(error, _request_id(request.scope), headers=headers)


async def _validation_error(request: Request, exc: Exception) -> Response:
    error = BridgeError.invalid_request("request parameters are invalid")
    return error_response(error, _request_id(request.scope))


async def _unexpected(request: Request, exc: Exception) -> Response:
    logger.error(
        "unhandled server error",
        exc_info=(type(exc), exc, exc.__traceback__),
        extra={"request_id": _request_id(request.scope)},
    )
    error = BridgeError(ErrorCode.INTERNAL, "internal error")
    return error_response(error, _request_id(request.scope))


def install_error_handlers(app: Any) -> None:
    """Route every failure FastAPI or Starlette would answer itself through the envelope."""
    app.add_exception_handler(BridgeError, bridge_error_handler)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)
