"""The one pure-ASGI middleware in front of every route.

Pure ASGI (not ``BaseHTTPMiddleware``) so streamed responses pass through unbuffered and
client disconnects reach the route. Per request it:

* assigns the request id and trace context and stamps both on every response (with
  OpenTelemetry traces on, the trace context is the request's server span, continuing the
  caller's ``traceparent``: :mod:`imagebridge.server.otel`);
* refuses oversized header sets (431) and bodies (413: by ``Content-Length`` up front and
  by counting streamed bytes, so chunked uploads are bounded too);
* bounds concurrent requests (``server.max_connections``: excess requests wait), body
  read stalls (``read_timeout_ms``, off by default) and write stalls (``write_timeout_ms``);
* while the server drains before stopping, refuses new requests (503 ``overloaded`` with
  ``Retry-After``) and counts the ones in flight (:mod:`imagebridge.server.shutdown`);
* answers any unexpected exception with the ``internal`` envelope;
* runs the work a route deferred until its answer is out (``RequestContext.deferred``);
* records the redacted operator event and writes one completion log line.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.server.context import CONTEXT_KEY, CURRENT_REQUEST, RequestContext
from imagebridge.server.errors import HttpError, body_too_large, error_response
from imagebridge.server.events import OperatorEvents, route_template
from imagebridge.server.ids import request_id_from, trace_context_from
from imagebridge.server.shutdown import Drain
from imagebridge.server.tracing import ACCESS_LOGGER

if TYPE_CHECKING:
    from imagebridge.server.otel.requests import RequestSpans

__all__ = ["BridgeMiddleware", "MiddlewareSettings"]

access_logger = logging.getLogger(ACCESS_LOGGER)
logger = logging.getLogger("imagebridge.server")

CLIENT_CLOSED_STATUS = 499


@dataclass(frozen=True, slots=True)
class MiddlewareSettings:
    max_header_bytes: int = 32_768
    max_body_bytes: int = 83_886_080
    max_connections: int | None = None
    read_timeout_ms: int = 0
    write_timeout_ms: int = 30_000


def _first(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _content_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    raw = _first(headers, b"content-length")
    if raw is None or not raw.strip().isdigit():
        return None
    return int(raw.strip())


class _LimitedReceive:
    """Counts request body bytes and fails the read that crosses the limit."""

    __slots__ = ("_limit", "_receive", "_timeout", "done", "received")

    def __init__(self, receive: Receive, limit: int, timeout: float | None) -> None:
        self._receive = receive
        self._limit = limit
        self._timeout = timeout
        self.received = 0
        self.done = False

    async def __call__(self) -> Message:
        if self.done or self._timeout is None:
            message = await self._receive()
        else:
            try:
                message = await asyncio.wait_for(self._receive(), self._timeout)
            except TimeoutError:
                raise HttpError(
                    408, ErrorCode.INVALID_REQUEST, "request body was not received in time"
                ) from None
        if message["type"] == "http.request" and not self.done:
            self.received += len(message.get("body", b""))
            if self.received > self._limit:
                self.done = True
                raise body_too_large(self._limit)
            if not message.get("more_body", False):
                self.done = True
        return message


class BridgeMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: MiddlewareSettings,
        events: OperatorEvents,
        drain: Drain | None = None,
        spans: RequestSpans | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.events = events
        self.drain = drain or Drain()
        self.spans = spans
        """Server spans when OpenTelemetry traces are on (:mod:`imagebridge.server.otel`)."""
        self._slots = (
            asyncio.Semaphore(settings.max_connections)
            if settings.max_connections is not None
            else None
        )
        self._write_timeout = (
            settings.write_timeout_ms / 1000 if settings.write_timeout_ms > 0 else None
        )
        self._read_timeout = settings.read_timeout_ms / 1000 if settings.read_timeout_ms else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.drain.enter()
        try:
            if self._slots is None:
                await self._handle(scope, receive, send)
                return
            async with self._slots:
                await self._handle(scope, receive, send)
        finally:
            self.drain.leave()

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        traceparent = _first(headers, b"traceparent")
        context = RequestContext(
            request_id=request_id_from(_first(headers, b"x-request-id")),
            trace=trace_context_from(traceparent),
            method=scope.get("method", "GET"),
            path=scope.get("path", "/"),
        )
        scope[CONTEXT_KEY] = context
        bound = CURRENT_REQUEST.set(context)
        try:
            spans = self.spans
            if spans is None or not spans.traces(context.path):
                await self._serve(scope, receive, send, context, headers)
                return
            route = route_template(context.path) or _public_route(context.path)
            tracestate = _first(headers, b"tracestate")
            with spans.request(context, route, traceparent, tracestate):
                await self._serve(scope, receive, send, context, headers)
        finally:
            CURRENT_REQUEST.reset(bound)

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        context: RequestContext,
        headers: list[tuple[bytes, bytes]],
    ) -> None:
        status = CLIENT_CLOSED_STATUS
        started = False
        stamp = [
            (b"x-request-id", context.request_id.encode("ascii")),
            (b"traceparent", context.trace.header().encode("ascii")),
        ]

        async def send_stamped(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                started = True
                status = int(message["status"])
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", []),
                        *stamp,
                        *context.extra_headers,
                        *context.marks,
                    ],
                }
            if self._write_timeout is None:
                await send(message)
                return
            try:
                await asyncio.wait_for(send(message), self._write_timeout)
            except TimeoutError:
                raise OSError("client stopped reading the response") from None

        try:
            refusal = self._refusal(headers)
            if refusal is None and self.drain.refuses(context.path):
                refusal = self.drain.refusal()
            if refusal is not None:
                await error_response(refusal, context.request_id)(scope, receive, send_stamped)
                return
            limited = _LimitedReceive(receive, self.settings.max_body_bytes, self._read_timeout)
            try:
                await self.app(scope, limited, send_stamped)
            except OSError:
                if started:
                    return  # the client went away mid-response; nothing left to tell it
                raise
            except Exception as exc:
                if started:
                    raise
                if not isinstance(exc, BridgeError):
                    logger.error(
                        "unhandled server error",
                        exc_info=(type(exc), exc, exc.__traceback__),
                        extra={"request_id": context.request_id},
                    )
                    exc = BridgeError(ErrorCode.INTERNAL, "internal error")
                await error_response(exc, context.request_id)(scope, receive, send_stamped)
        finally:
            self._finish(context, status)  # the caller's request is complete: log it now
            await self._deferred(context)

    @staticmethod
    async def _deferred(context: RequestContext) -> None:
        """The request's deferred work, once its answer is out (failures are logged)."""
        while context.deferred:
            work = context.deferred.pop(0)
            try:
                await work()
            except Exception as exc:
                logger.error(
                    "deferred request work failed",
                    exc_info=(type(exc), exc, exc.__traceback__),
                    extra={"request_id": context.request_id},
                )

    def _refusal(self, headers: list[tuple[bytes, bytes]]) -> BridgeError | None:
        header_bytes = sum(len(key) + len(value) for key, value in headers)
        if header_bytes > self.settings.max_header_bytes:
            return HttpError(
                431,
                ErrorCode.INVALID_REQUEST,
                "request headers exceed the byte limit",
                details={"maximum_bytes": self.settings.max_header_bytes},
            )
        length = _content_length(headers)
        if length is not None and length > self.settings.max_body_bytes:
            return body_too_large(self.settings.max_body_bytes)
        return None

    def _finish(self, context: RequestContext, status: int) -> None:
        duration = context.elapsed_ms()
        self.events.record(context.method, context.path, status, duration, owner=context.owner)
        outcome = context.outcome
        extra: dict[str, object] = {
            "request_id": context.request_id,
            "trace_id": context.trace.trace_id,
            "span_id": context.trace.span_id,
            "method": context.method,
            "route": route_template(context.path) or _public_route(context.path),
            "status": status,
            "duration_ms": duration,
        }
        if outcome is not None:
            extra.update(
                provider=outcome.provider,
                code=outcome.code or "none",
                total_ms=outcome.total_ms,
                provider_ms=outcome.provider_ms,
                queue_ms=outcome.queue_ms,
            )
        access_logger.info("request completed", extra=extra)
        if self.spans is not None:
            self.spans.answered(status)


def _public_route(path: str) -> str:
    """Log label for unrecorded paths: known public routes by name, anything else generic."""
    if path in ("/health/live", "/health/ready", "/v1/openapi.json"):
        return path
    if path.startswith("/dashboard"):
        return "/dashboard"
    return "/unmatched"
