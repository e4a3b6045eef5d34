"""OpenTelemetry traces: off by default, the ``otel`` extra, OTLP to a collector.

:func:`start_tracing` resolves ``[server.tracing.otel]`` and the standard ``OTEL_*``
variables (:mod:`.settings`); when traces are on it builds the bridge's own tracer
provider (:mod:`.provider`) and returns a :class:`Tracing`: the server spans the middleware
opens per request (:mod:`.requests`) and the engine's tracer (:mod:`.tracer`), which
:func:`with_tracing` installs for the app's lifespan (so jobs claimed at startup are
traced too) and removes, flushing the export, when it ends.

When traces are off nothing here imports OpenTelemetry, and the engine's spans stay the
no-op of :mod:`imagebridge.engine.tracing`. The span tree is drawn in
docs/operations.md §4 (Traces).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from imagebridge.config.model import OtelSettings
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine import tracing
from imagebridge.server.otel.settings import TraceExport, resolve_export

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from imagebridge.server.otel.requests import RequestSpans

__all__ = ["INSTALL_HINT", "TraceExport", "Tracing", "start_tracing", "with_tracing"]

logger = logging.getLogger("imagebridge.server")

INSTALL_HINT = "pip install 'imagebridge[otel]'"
_SCOPE = "imagebridge"
Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[None]]


@dataclass(slots=True)
class Tracing:
    """A running export: the server spans, the engine's tracer and what flushes them."""

    export: TraceExport
    provider: TracerProvider
    requests: RequestSpans
    tracer: tracing.Tracer

    async def shutdown(self) -> None:
        """Export what is left (bounded by the export timeout), off the event loop."""
        await asyncio.to_thread(self.provider.shutdown)


def start_tracing(section: OtelSettings, env: Mapping[str, str]) -> Tracing | None:
    """The export ``section`` and ``env`` configure, running; ``None`` when traces are off.

    Without the ``otel`` extra, traces asked for by ``enabled = true`` are a
    ``configuration`` error; traces asked for by the environment alone (an
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` meant for other programs) are a warning.
    """
    export = resolve_export(section, env)
    if export is None:
        return None
    try:
        from opentelemetry.sdk.trace import TracerProvider  # noqa: F401 - the extra's marker

        from imagebridge.server.otel.provider import build_provider
        from imagebridge.server.otel.requests import RequestSpans
        from imagebridge.server.otel.tracer import OtelTracer
    except ImportError:
        if export.explicit:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                f"OpenTelemetry traces need the otel extra: {INSTALL_HINT}",
                details={"field": "server.tracing.otel.enabled"},
            ) from None
        logger.warning(
            "OTLP endpoint set but the otel extra is not installed; traces are off",
            extra={"code": "configuration"},
        )
        return None
    provider = build_provider(export)
    otel_tracer = provider.get_tracer(_SCOPE)
    return Tracing(export, provider, RequestSpans(otel_tracer), OtelTracer(otel_tracer))


def with_tracing(lifespan: Lifespan, traces: Tracing | None) -> Lifespan:
    """``lifespan`` with ``traces``' tracer installed around it (unchanged when off)."""
    if traces is None:
        return lifespan

    @contextlib.asynccontextmanager
    async def traced(app: Any) -> AsyncIterator[None]:
        remove = tracing.install(traces.tracer)
        try:
            async with lifespan(app):
                yield
        finally:
            remove()
            await traces.shutdown()

    return traced
