"""The tracing port: named spans around a request's stages, no-ops until a tracer is installed.

The engine, the adapters and the services say where a stage begins and ends
(``with span(ADMISSION, {GATE: "global"}):``) and never import OpenTelemetry: the server
installs its tracer (:mod:`imagebridge.server.otel`) when traces are configured. Until then
every span is one shared object whose methods do nothing, so an untraced request pays a
function call and a ``with`` per stage (``bench/gateway.py --tracing`` measures it).

There is one tracer per process, as OpenTelemetry has one global provider: an app's
lifespan installs its tracer (:func:`install`) and removes it when it ends. Span names and
attribute keys are constants here, so every layer names a stage the same way and
docs/operations.md (§4, Traces) can draw the tree once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Protocol

__all__ = [
    "ACCOUNT",
    "ADMISSION",
    "ARTIFACT_PUBLISH",
    "ATTEMPT",
    "BACKEND",
    "BILLING",
    "ERROR_CODE",
    "FAILED_OUTPUTS",
    "FANOUT_CHILD",
    "FANOUT_COUNT",
    "FANOUT_OFFSET",
    "GATE",
    "IMAGES",
    "INPUTS",
    "JOB",
    "JOB_CLAIM",
    "JOB_ID",
    "JOB_RUN",
    "MODEL",
    "OUTCOME",
    "PROVIDER",
    "VERIFICATION",
    "AttributeValue",
    "Attributes",
    "NoopTracer",
    "OpenSpan",
    "Span",
    "Tracer",
    "begin",
    "current_ids",
    "install",
    "installed",
    "span",
]

AttributeValue = str | bool | int | float
Attributes = Mapping[str, AttributeValue]

# -- span names ------------------------------------------------------------------------------

ADMISSION = "admission"
"""Waiting in line at an admission gate (the global one, or the route's provider's); a
request admitted at once has none."""
INPUTS = "inputs"
"""Loading and verifying the request's input images (local files, inline data, URLs)."""
ATTEMPT = "provider.attempt"
"""One route of a request: its provider's gate, call, verification and delivery."""
FANOUT_CHILD = "fanout.child"
"""One chunk of an emulated multi-image request: one upstream call of ``count`` images."""
VERIFICATION = "verification"
"""Decoding and checking every output image the provider answered."""
ARTIFACT_PUBLISH = "artifact.publish"
"""Storing one output image as an artifact (filesystem or S3)."""
JOB = "job"
"""The root of a job's trace on the instance that claimed it."""
JOB_CLAIM = "job.claim"
"""Taking the job from the queue (the store's claim)."""
JOB_RUN = "job.run"
"""Running the claimed job through the engine and recording its outcome."""

# -- attribute keys --------------------------------------------------------------------------

GATE = "imagebridge.gate"
PROVIDER = "imagebridge.provider"
MODEL = "imagebridge.model"
ACCOUNT = "imagebridge.account"
"""The pool account(s) a call ran on, comma-separated; absent when no pool is involved."""
OUTCOME = "imagebridge.outcome"
"""``succeeded`` or ``failed``."""
ERROR_CODE = "imagebridge.error.code"
FAILED_OUTPUTS = "imagebridge.failed_outputs"
"""Outputs an answer reports failed (``best_effort`` keeps the others)."""
BILLING = "imagebridge.billing"
"""``billed`` (the upstream call ran), ``not_billed`` (it cannot have run) or ``unknown``."""
BACKEND = "imagebridge.artifacts.backend"
"""``filesystem`` or ``s3``."""
FANOUT_OFFSET = "imagebridge.fanout.offset"
"""The index of a fan-out child's first output in the request's outputs."""
FANOUT_COUNT = "imagebridge.fanout.count"
IMAGES = "imagebridge.images"
JOB_ID = "imagebridge.job.id"


class Span(Protocol):
    """What a stage can say about itself while it runs."""

    def set_attribute(self, key: str, value: AttributeValue) -> None: ...

    def fail(self, error_type: str) -> None:
        """Mark the span failed with a stable error type (a ``BridgeError`` code), for a
        failure that does not leave the ``with`` as an exception."""
        ...


class OpenSpan(Span, Protocol):
    """A span begun outside a ``with``: a job's root, begun when its claim began and
    ended once the job has run (possibly in another task)."""

    def record_child(
        self, name: str, start_ns: int, end_ns: int, attributes: Attributes | None = None
    ) -> None:
        """A finished child span that ran from ``start_ns`` to ``end_ns`` (``time.time_ns``)."""
        ...

    def activate(self) -> AbstractContextManager[Span]:
        """Make this the current span for the ``with``; end it on leaving."""
        ...

    def end(self) -> None: ...


class Tracer(Protocol):
    def span(self, name: str, attributes: Attributes | None = None) -> AbstractContextManager[Span]:
        """A child of the current span (or a new trace's root), current inside the ``with``;
        an exception leaving it marks it failed with the error's code or type."""
        ...

    def begin(
        self, name: str, attributes: Attributes | None = None, *, start_ns: int | None = None
    ) -> OpenSpan:
        """The root span of a new trace, begun at ``start_ns`` (default: now), not current."""
        ...

    def current_ids(self) -> tuple[str, str] | None:
        """The current span's trace and span ids in lower-case hex, if one is recording."""
        ...


class _NoopSpan:
    """Every span while nothing is installed: one shared object, every method a no-op."""

    __slots__ = ()

    def __enter__(self) -> _NoopSpan:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        return None

    def fail(self, error_type: str) -> None:
        return None

    def record_child(
        self, name: str, start_ns: int, end_ns: int, attributes: Attributes | None = None
    ) -> None:
        return None

    def activate(self) -> _NoopSpan:
        return self

    def end(self) -> None:
        return None


_NOOP_SPAN = _NoopSpan()


class NoopTracer:
    """The default: spans that cost a call and record nothing."""

    __slots__ = ()

    def span(self, name: str, attributes: Attributes | None = None) -> _NoopSpan:
        return _NOOP_SPAN

    def begin(
        self, name: str, attributes: Attributes | None = None, *, start_ns: int | None = None
    ) -> _NoopSpan:
        return _NOOP_SPAN

    def current_ids(self) -> tuple[str, str] | None:
        return None


_NOOP_TRACER = NoopTracer()
_tracer: Tracer = _NOOP_TRACER
_installed: list[Tracer] = []


def install(tracer: Tracer) -> Callable[[], None]:
    """Make ``tracer`` the process's tracer until the returned function removes it.

    The latest installed tracer still in place is the one used: apps stopped in any order
    (tests run several) never leave a stopped app's tracer behind.
    """
    global _tracer
    _installed.append(tracer)
    _tracer = tracer

    def remove() -> None:
        global _tracer
        with contextlib.suppress(ValueError):
            _installed.remove(tracer)
        _tracer = _installed[-1] if _installed else _NOOP_TRACER

    return remove


def installed() -> Tracer:
    return _tracer


def span(name: str, attributes: Attributes | None = None) -> AbstractContextManager[Span]:
    """A span of the installed tracer: ``with span(VERIFICATION): ...``."""
    return _tracer.span(name, attributes)


def begin(
    name: str, attributes: Attributes | None = None, *, start_ns: int | None = None
) -> OpenSpan:
    """The root span of a new trace, on the installed tracer (see :meth:`Tracer.begin`)."""
    return _tracer.begin(name, attributes, start_ns=start_ns)


def current_ids() -> tuple[str, str] | None:
    """The current span's ``(trace_id, span_id)``, for log lines."""
    return _tracer.current_ids()
