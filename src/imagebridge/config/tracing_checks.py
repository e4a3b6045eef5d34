"""Checks of ``[server.tracing.otel]`` (OpenTelemetry traces over OTLP).

The keys are checked whether or not traces are on, so a mistake shows before anyone turns
them on. The standard ``OTEL_*`` variables a key falls back to are checked by the same
rules when the server starts (:mod:`imagebridge.server.otel.settings`).
"""

from __future__ import annotations

from imagebridge.config._net import ENV_NAME_RULE, is_env_name, valid_service_endpoint
from imagebridge.config.model import OTLP_PROTOCOLS, TRACE_SAMPLERS, BridgeConfig
from imagebridge.config.store_checks import Report

__all__ = [
    "COLLECTOR_URL_RULE",
    "MAX_EXPORT_TIMEOUT_MS",
    "MAX_QUEUE_SIZE",
    "MAX_SCHEDULE_DELAY_MS",
    "check_tracing",
    "valid_service_endpoint",
]

COLLECTOR_URL_RULE = "must be an http(s) URL without credentials, query or fragment"
MAX_EXPORT_TIMEOUT_MS = 5 * 60 * 1000
MAX_SCHEDULE_DELAY_MS = 5 * 60 * 1000
MAX_QUEUE_SIZE = 1_000_000
"""Finished spans held in memory for export: a bound on what an unreachable collector costs."""


def check_tracing(config: BridgeConfig, report: Report) -> None:
    """Every ``server.tracing.otel`` key."""
    otel = config.server.tracing.otel
    prefix = "server.tracing.otel"
    if otel.endpoint is not None and not valid_service_endpoint(otel.endpoint):
        report(f"{prefix}.endpoint", "invalid", COLLECTOR_URL_RULE)
    if otel.protocol is not None and otel.protocol not in OTLP_PROTOCOLS:
        report(f"{prefix}.protocol", "invalid", "must be one of: " + ", ".join(OTLP_PROTOCOLS))
    if otel.service_name is not None and not 1 <= len(otel.service_name.encode()) <= 255:
        report(f"{prefix}.service_name", "out_of_range", "must be 1 to 255 bytes")
    if otel.sampler is not None and otel.sampler not in TRACE_SAMPLERS:
        report(f"{prefix}.sampler", "invalid", "must be one of: " + ", ".join(TRACE_SAMPLERS))
    if otel.sampler_arg is not None and not 0.0 <= otel.sampler_arg <= 1.0:
        report(f"{prefix}.sampler_arg", "out_of_range", "must be between 0 and 1")
    if otel.headers_env is not None and not is_env_name(otel.headers_env):
        report(f"{prefix}.headers_env", "invalid", ENV_NAME_RULE)
    bounds = (
        ("export_timeout_ms", otel.export_timeout_ms, MAX_EXPORT_TIMEOUT_MS),
        ("schedule_delay_ms", otel.schedule_delay_ms, MAX_SCHEDULE_DELAY_MS),
        ("max_queue_size", otel.max_queue_size, MAX_QUEUE_SIZE),
        ("max_export_batch_size", otel.max_export_batch_size, MAX_QUEUE_SIZE),
    )
    for name, value, maximum in bounds:
        if value is not None and not 1 <= value <= maximum:
            report(f"{prefix}.{name}", "out_of_range", f"must be 1 to {maximum}")
    queue, batch = otel.max_queue_size, otel.max_export_batch_size
    if queue is not None and batch is not None and batch > queue:
        report(
            f"{prefix}.max_export_batch_size",
            "inconsistent",
            "a batch cannot be larger than max_queue_size",
        )
