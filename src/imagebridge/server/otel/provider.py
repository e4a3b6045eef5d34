"""The OpenTelemetry SDK as a :class:`TraceExport` asks: sampler, resource, batch export.

Imported only when traces are on (it needs the ``otel`` extra). Spans are exported from
the SDK's batch thread, never on the event loop; a full queue drops new spans instead of
making a request wait. The provider is this bridge's own, not OpenTelemetry's global one:
libraries that trace through the global API stay silent, and two apps in one process
(tests) do not share an exporter.
"""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider, sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from imagebridge._version import __version__
from imagebridge.server.otel.settings import TraceExport

__all__ = ["build_provider"]


def _sampler(name: str, ratio: float) -> sampling.Sampler:
    roots: dict[str, sampling.Sampler] = {
        "always_on": sampling.ALWAYS_ON,
        "always_off": sampling.ALWAYS_OFF,
        "traceidratio": sampling.TraceIdRatioBased(ratio),
    }
    base = name.removeprefix("parentbased_")
    root = roots[base]
    return sampling.ParentBased(root) if name.startswith("parentbased_") else root


def _exporter(export: TraceExport) -> SpanExporter:
    timeout_s = export.export_timeout_ms / 1000
    if export.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=export.endpoint, headers=export.headers, timeout=timeout_s)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=export.endpoint, headers=export.headers, timeout=timeout_s)


def build_provider(export: TraceExport) -> TracerProvider:
    """A tracer provider exporting over OTLP in batches, as ``export`` says."""
    resource = Resource(
        {
            **export.resource,
            "service.name": export.service_name,
            "service.version": __version__,
        }
    )
    provider = TracerProvider(
        sampler=_sampler(export.sampler, export.sampler_arg),
        resource=resource,
        shutdown_on_exit=False,  # the app's lifespan shuts it down (and flushes)
    )
    provider.add_span_processor(
        BatchSpanProcessor(
            _exporter(export),
            max_queue_size=export.max_queue_size,
            schedule_delay_millis=export.schedule_delay_ms,
            max_export_batch_size=export.max_export_batch_size,
            export_timeout_millis=export.export_timeout_ms,
        )
    )
    return provider
