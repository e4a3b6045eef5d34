"""Per-request facts the middleware collects and the routes fill in.

The middleware creates one :class:`RequestContext` per HTTP request and stores it in the
ASGI scope; routes add what only they know (the caller's ownership scope, the provider
and outcome of an image operation), and the middleware reads it back for the response
headers, the operator event and the single completion log line.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.types import Scope

from imagebridge.server.ids import TraceContext

__all__ = [
    "CONTEXT_KEY",
    "CURRENT_REQUEST",
    "OperationOutcome",
    "RequestContext",
    "context_of",
    "request_context",
]

CONTEXT_KEY = "imagebridge.context"


@dataclass(slots=True)
class OperationOutcome:
    """What an image operation reports for logs and metrics (never prompts or bytes)."""

    provider: str
    code: str | None = None
    total_ms: int | None = None
    provider_ms: int | None = None
    queue_ms: int | None = None


@dataclass(slots=True)
class RequestContext:
    request_id: str
    trace: TraceContext
    method: str
    path: str
    started: float = field(default_factory=time.monotonic)
    owner: str = "anonymous-local"
    principal: Any = None
    """The caller (``server.auth.Principal``) once a protected route has checked it."""
    outcome: OperationOutcome | None = None
    extra_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    """Headers every answer carries (a key's remaining images), stamped by the middleware."""
    deferred: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Work to do once the answer is out (a synchronous request keeping its images and
    writing its record): run by the middleware, in order, still inside the request, so the
    shutdown drain waits for it."""
    marks: list[tuple[bytes, bytes]] = field(default_factory=list)
    """Headers an image operation adds when known before its answer starts (its history
    record's id, that it replays an earlier generation), stamped by the middleware."""

    def elapsed_ms(self) -> int:
        return max(0, int((time.monotonic() - self.started) * 1000))


CURRENT_REQUEST: ContextVar[RequestContext | None] = ContextVar("imagebridge_request", default=None)
"""The request being served (set by the middleware): log lines written while serving it,
and in the tasks it starts, carry its trace and span ids."""


def context_of(scope: Scope) -> RequestContext:
    context = scope.get(CONTEXT_KEY)
    if not isinstance(context, RequestContext):  # only when the middleware is missing
        raise RuntimeError("request context middleware is not installed")
    return context


def request_context(request: Request) -> RequestContext:
    return context_of(request.scope)
