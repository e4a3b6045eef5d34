"""Request ids and W3C trace context: what every response carries.

A caller's ``x-request-id`` is echoed only when it is short and made of safe characters,
so it can be logged and reflected without escaping; anything else is replaced by a fresh
UUIDv7. A valid inbound ``traceparent`` keeps its trace id and flags and gets a new span
id (this hop is a new span); an invalid one starts a new trace.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from imagebridge.engine.runtime import is_valid_request_id
from imagebridge.imaging.ids import uuid7

__all__ = ["TraceContext", "mint_request_id", "request_id_from", "trace_context_from"]

_TRACEPARENT_RE = re.compile(r"^00-([0-9a-fA-F]{32})-([0-9a-fA-F]{16})-([0-9a-fA-F]{2})$")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def mint_request_id() -> str:
    return str(uuid7())


def request_id_from(inbound: str | None) -> str:
    """The caller's id when it is 1–128 bytes of ``[A-Za-z0-9-_.:]``, else a new UUIDv7."""
    if inbound is not None and is_valid_request_id(inbound):
        return inbound
    return mint_request_id()


def _new_span_id() -> str:
    while True:
        span = secrets.token_hex(8)
        if span != _ZERO_SPAN:
            return span


@dataclass(frozen=True, slots=True)
class TraceContext:
    """One hop of a W3C trace: lower-case hex ids and the two-digit flags."""

    trace_id: str
    span_id: str
    flags: str

    def header(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags}"


def trace_context_from(inbound: str | None) -> TraceContext:
    """Continue a valid inbound ``traceparent`` with a new span, or start a new trace."""
    if inbound is not None:
        match = _TRACEPARENT_RE.fullmatch(inbound)
        if match is not None:
            trace_id, parent_id, flags = (part.lower() for part in match.groups())
            if trace_id != _ZERO_TRACE and parent_id != _ZERO_SPAN:
                return TraceContext(trace_id, _new_span_id(), flags)
    return TraceContext(uuid7().hex, _new_span_id(), "01")
