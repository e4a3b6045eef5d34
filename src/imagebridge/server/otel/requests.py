"""One server span per HTTP request, continuing the caller's W3C trace context.

The span's parent is the caller's ``traceparent`` (and ``tracestate``) when they are valid;
its ids become the request's :class:`~imagebridge.server.ids.TraceContext`, so the
``traceparent`` the answer carries and the access log line name this very span. Named
``METHOD /route/{template}`` with HTTP semantic-convention attributes and the request id;
never a query string, a header value or a body. Liveness, readiness and ``/metrics``
(probed and scraped every few seconds) are not traced.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from imagebridge.server.context import RequestContext
from imagebridge.server.ids import TraceContext
from imagebridge.server.otel.tracer import ERROR_TYPE, error_type, hex_ids

__all__ = ["UNTRACED_PATHS", "RequestSpans"]

UNTRACED_PATHS = frozenset({"/health/live", "/health/ready", "/metrics"})
_PROPAGATOR = TraceContextTextMapPropagator()


class RequestSpans:
    """The server spans of one app."""

    __slots__ = ("_tracer",)

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    @staticmethod
    def traces(path: str) -> bool:
        return path not in UNTRACED_PATHS

    @contextlib.contextmanager
    def request(
        self,
        context: RequestContext,
        route: str,
        traceparent: str | None,
        tracestate: str | None,
    ) -> Iterator[None]:
        """The request's span, current inside the ``with``; ``context.trace`` becomes its ids."""
        carrier = {"traceparent": traceparent} if traceparent else {}
        if traceparent and tracestate:
            carrier["tracestate"] = tracestate
        parent = _PROPAGATOR.extract(carrier) if carrier else otel_context.Context()
        span = self._tracer.start_span(
            f"{context.method} {route}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": context.method,
                "http.route": route,
                "imagebridge.request_id": context.request_id,
            },
        )
        context.trace = TraceContext(*hex_ids(span))
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        try:
            yield
        except BaseException as exc:
            span.set_attribute(ERROR_TYPE, error_type(exc))
            span.set_status(Status(StatusCode.ERROR, error_type(exc)))
            raise
        finally:
            otel_context.detach(token)
            span.end()

    @staticmethod
    def answered(status: int) -> None:
        """The current request span's answer: its status (a 5xx marks it failed)."""
        span = trace.get_current_span()
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_attribute(ERROR_TYPE, str(status))
            span.set_status(Status(StatusCode.ERROR))
