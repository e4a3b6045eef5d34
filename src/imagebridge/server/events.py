"""The redacted operator event ring shown by ``/v1/diagnostics``.

Only a route *template* is kept, never the concrete path: ``/v1/sessions/private-key``
is recorded as ``/v1/sessions/{key}``, so the ring can hold no prompt, key, id or path.
Health probes, the OpenAPI document and dashboard assets are not recorded. Each entry
remembers whose request it was (the ownership scope, never shown), so a named API key's
``/v1/diagnostics`` lists its own requests only (docs/keys.md, "Operator views").
"""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_EVENT_CAPACITY", "OperatorEvents", "route_template"]

DEFAULT_EVENT_CAPACITY = 256
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_EXACT = frozenset(
    {
        "/v1/images",
        "/v1/images/stream",
        "/v1/images/generations",
        "/v1/images/edits",
        "/v1/providers",
        "/v1/diagnostics",
        "/v1/diagnostics/extended",
        "/v1/jobs",
        "/v1/presets",
        "/metrics",
    }
)
_SEGMENT = r"[^/]+"
_TEMPLATES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), template)
    for pattern, template in (
        (rf"^/v1/jobs/{_SEGMENT}$", "/v1/jobs/{id}"),
        (rf"^/v1/jobs/{_SEGMENT}/partial$", "/v1/jobs/{id}/partial"),
        (rf"^/v1/sessions/{_SEGMENT}$", "/v1/sessions/{key}"),
        (rf"^/v1/artifacts/{_SEGMENT}$", "/v1/artifacts/{id}"),
        (rf"^/v1/artifacts/{_SEGMENT}/thumbnail$", "/v1/artifacts/{id}/thumbnail"),
        (rf"^/v1/providers/{_SEGMENT}/capabilities$", "/v1/providers/{provider}/capabilities"),
        (rf"^/v1/presets/{_SEGMENT}$", "/v1/presets/{name}"),
    )
)


def route_template(path: str) -> str | None:
    """The recorded route for ``path``, or ``None`` for paths that are never recorded."""
    if path in _EXACT:
        return path
    if path == "/v1/openapi.json" or not path.startswith("/v1/"):
        return None
    for pattern, template in _TEMPLATES:
        if pattern.fullmatch(path):
            return template
    return "/v1/unmatched"


def method_label(method: str) -> str:
    return method if method in _METHODS else "OTHER"


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    sequence: int
    timestamp_ms: int
    method: str
    route: str
    status: int
    duration_ms: int
    owner: str = ""
    """The caller's ownership scope (for filtering; not part of the document)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "timestamp_ms": self.timestamp_ms,
            "method": self.method,
            "route": self.route,
            "status": self.status,
            "duration_ms": self.duration_ms,
        }


class OperatorEvents:
    """A bounded newest-first history; the oldest entries are dropped and counted."""

    def __init__(self, capacity: int = DEFAULT_EVENT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("event capacity must be positive")
        self.capacity = capacity
        self._items: deque[RecordedRequest] = deque(maxlen=capacity)
        self._sequence = 0
        self.dropped = 0

    def record(
        self, method: str, path: str, status: int, duration_ms: int, *, owner: str = ""
    ) -> None:
        route = route_template(path)
        if route is None:
            return
        if len(self._items) == self.capacity:
            self.dropped += 1
        self._sequence += 1
        self._items.append(
            RecordedRequest(
                sequence=self._sequence,
                timestamp_ms=time.time_ns() // 1_000_000,
                method=method_label(method),
                route=route,
                status=status,
                duration_ms=max(0, duration_ms),
                owner=owner,
            )
        )

    def snapshot(self, owner: str | None = None) -> dict[str, Any]:
        """The history; with ``owner``, that caller's entries only (and no dropped count,
        which would tell how busy everyone else is)."""
        items = reversed(self._items)
        if owner is None:
            return {
                "capacity": self.capacity,
                "dropped": self.dropped,
                "items": [event.to_dict() for event in items],
            }
        return {
            "capacity": self.capacity,
            "dropped": 0,
            "items": [event.to_dict() for event in items if event.owner == owner],
        }
