"""The engine's tracing port (:mod:`imagebridge.engine.tracing`) on OpenTelemetry.

A span is current inside its ``with`` (OpenTelemetry's context, a context variable, so
tasks started inside it are its children). A failure names its ``error.type``: a
``BridgeError``'s stable code, ``cancelled``, or the exception's class; never its message
or a stack (messages may quote an upstream's answer).
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from imagebridge.contract.errors import BridgeError
from imagebridge.engine.tracing import Attributes, AttributeValue

__all__ = ["ERROR_TYPE", "OtelTracer", "error_type", "hex_ids"]

ERROR_TYPE = "error.type"


def error_type(error: BaseException) -> str:
    if isinstance(error, BridgeError):
        return error.code.value
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    return type(error).__name__


def hex_ids(span: trace.Span) -> tuple[str, str, str]:
    """``(trace_id, span_id, flags)`` of ``span`` as ``traceparent`` writes them."""
    context = span.get_span_context()
    return (
        format(context.trace_id, "032x"),
        format(context.span_id, "016x"),
        format(context.trace_flags, "02x"),
    )


class _SpanView:
    """The port's :class:`~imagebridge.engine.tracing.Span` over an OpenTelemetry span."""

    __slots__ = ("span",)

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self.span.set_attribute(key, value)

    def fail(self, error_type: str) -> None:
        self.span.set_attribute(ERROR_TYPE, error_type)
        self.span.set_status(Status(StatusCode.ERROR, error_type))

    def failed_by(self, error: BaseException) -> None:
        """Mark the span failed by ``error`` leaving it, unless it already says why."""
        if not self.span.is_recording():
            return
        attributes = getattr(self.span, "attributes", None) or {}
        if ERROR_TYPE not in attributes:
            self.fail(error_type(error))


class _Activation:
    """``with open_span.activate()``: a span made current, and ended on leaving."""

    __slots__ = ("_token", "_view")

    def __init__(self, view: _SpanView) -> None:
        self._view = view

    def __enter__(self) -> _SpanView:
        self._token = otel_context.attach(trace.set_span_in_context(self._view.span))
        return self._view

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if exc is not None:
                self._view.failed_by(exc)
        finally:
            otel_context.detach(self._token)
            self._view.span.end()


class _Scope(_Activation):
    """One ``with tracer.span(...)``: the span begins on entering, a child of the current one."""

    __slots__ = ("_attributes", "_name", "_tracer")

    def __init__(self, tracer: trace.Tracer, name: str, attributes: Attributes | None) -> None:
        self._tracer = tracer
        self._name = name
        self._attributes = attributes

    def __enter__(self) -> _SpanView:
        self._view = _SpanView(self._tracer.start_span(self._name, attributes=self._attributes))
        return super().__enter__()


class _OpenSpan(_SpanView):
    """The port's :class:`~imagebridge.engine.tracing.OpenSpan`: a root begun earlier."""

    __slots__ = ("_tracer",)

    def __init__(self, tracer: trace.Tracer, span: trace.Span) -> None:
        super().__init__(span)
        self._tracer = tracer

    def record_child(
        self, name: str, start_ns: int, end_ns: int, attributes: Attributes | None = None
    ) -> None:
        child = self._tracer.start_span(
            name,
            context=trace.set_span_in_context(self.span),
            attributes=attributes,
            start_time=start_ns,
        )
        child.end(end_time=end_ns)

    def activate(self) -> _Activation:
        return _Activation(self)

    def end(self) -> None:
        self.span.end()


class OtelTracer:
    """Spans of one OpenTelemetry tracer (the bridge's own provider's)."""

    __slots__ = ("_tracer",)

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def span(self, name: str, attributes: Attributes | None = None) -> _Scope:
        return _Scope(self._tracer, name, attributes)

    def begin(
        self, name: str, attributes: Attributes | None = None, *, start_ns: int | None = None
    ) -> _OpenSpan:
        span = self._tracer.start_span(
            name, context=otel_context.Context(), attributes=attributes, start_time=start_ns
        )
        return _OpenSpan(self._tracer, span)

    def current_ids(self) -> tuple[str, str] | None:
        span = trace.get_current_span()
        if not span.get_span_context().is_valid:
            return None
        trace_id, span_id, _ = hex_ids(span)
        return trace_id, span_id
