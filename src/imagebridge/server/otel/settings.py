"""Where and how spans are exported: ``[server.tracing.otel]`` over the standard variables.

Precedence, per setting: a key that is set (file, ``IMAGEGEN_BRIDGE__…``, ``--set``) wins;
a key left unset falls back to OpenTelemetry's standard variable (the signal-specific
``OTEL_EXPORTER_OTLP_TRACES_*`` before the generic ``OTEL_EXPORTER_OTLP_*``), then to
OpenTelemetry's default. ``OTEL_SDK_DISABLED=true`` turns traces off whatever the keys say
(the SDK's own switch). A variable's value is held to the same rule as the key it stands
in for; a refusal names the variable, never its value (headers carry tokens).

Pure: nothing here imports OpenTelemetry, so the server resolves (and refuses) its tracing
settings without the ``otel`` extra installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

from imagebridge.config.model import OTLP_PROTOCOLS, TRACE_SAMPLERS, OtelSettings
from imagebridge.config.tracing_checks import (
    COLLECTOR_URL_RULE,
    MAX_EXPORT_TIMEOUT_MS,
    MAX_QUEUE_SIZE,
    MAX_SCHEDULE_DELAY_MS,
    valid_service_endpoint,
)
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["DEFAULT_SERVICE_NAME", "TraceExport", "resolve_export"]

DEFAULT_SERVICE_NAME = "imagegen-bridge"
_HTTP_DEFAULT = "http://localhost:4318"
_GRPC_DEFAULT = "http://localhost:4317"
_TRACES_PATH = "/v1/traces"
_OTLP = "OTEL_EXPORTER_OTLP_"
_TRACES = "OTEL_EXPORTER_OTLP_TRACES_"
_FIELD = "server.tracing.otel"


@dataclass(frozen=True, slots=True)
class TraceExport:
    """The resolved export: what the SDK is built with (:mod:`.provider`)."""

    endpoint: str
    """The URL the exporter is given (for ``http/protobuf``, with ``/v1/traces``)."""
    protocol: str
    service_name: str
    sampler: str
    sampler_arg: float
    export_timeout_ms: int
    schedule_delay_ms: int
    max_queue_size: int
    max_export_batch_size: int
    explicit: bool
    """``enabled = true`` was set: a missing ``otel`` extra is an error, not a warning."""
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    resource: dict[str, str] = field(default_factory=dict)
    """``OTEL_RESOURCE_ATTRIBUTES`` (``service.name`` is :attr:`service_name`)."""


def _refuse(source: str, rule: str) -> BridgeError:
    field_name = source if source.startswith(_FIELD) else None
    details = {"field": field_name} if field_name else {"variable": source}
    return BridgeError(
        ErrorCode.CONFIGURATION, f"OpenTelemetry setting {source} {rule}", details=details
    )


def _variable(env: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    """The first of ``names`` set to a non-empty value, with that value."""
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return name, value
    return None


def _is_true(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() == "true"


def _enabled(section: OtelSettings, env: Mapping[str, str]) -> bool:
    if _is_true(env, "OTEL_SDK_DISABLED") or section.enabled is False:
        return False
    if section.enabled:
        return True
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    if exporter not in ("", "otlp"):
        raise _refuse("OTEL_TRACES_EXPORTER", 'must be "otlp" or "none" (only OTLP is exported)')
    endpoint = _variable(env, f"{_TRACES}ENDPOINT", f"{_OTLP}ENDPOINT")
    return section.endpoint is not None or endpoint is not None


def _protocol(section: OtelSettings, env: Mapping[str, str]) -> str:
    if section.protocol is not None:
        return section.protocol
    found = _variable(env, f"{_TRACES}PROTOCOL", f"{_OTLP}PROTOCOL")
    if found is None:
        return "http/protobuf"
    name, value = found
    if value not in OTLP_PROTOCOLS:
        raise _refuse(name, "must be one of: " + ", ".join(OTLP_PROTOCOLS))
    return value


def _endpoint(section: OtelSettings, env: Mapping[str, str], protocol: str) -> str:
    http = protocol == "http/protobuf"
    if section.endpoint is not None:
        base = section.endpoint
        return base.rstrip("/") + _TRACES_PATH if http else base
    signal = _variable(env, f"{_TRACES}ENDPOINT")
    if signal is not None:
        name, value = signal
        if not valid_service_endpoint(value):
            raise _refuse(name, COLLECTOR_URL_RULE)
        return value  # the signal's own URL, used as it is
    generic = _variable(env, f"{_OTLP}ENDPOINT")
    if generic is not None:
        name, value = generic
        if not valid_service_endpoint(value):
            raise _refuse(name, COLLECTOR_URL_RULE)
        return value.rstrip("/") + _TRACES_PATH if http else value
    return _HTTP_DEFAULT + _TRACES_PATH if http else _GRPC_DEFAULT


def _pairs(source: str, text: str) -> dict[str, str]:
    """``key=value,…`` (values percent-encoded), as the OTLP header and resource variables
    are written."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _refuse(source, "must be a list of key=value pairs separated by commas")
        pairs[unquote(key.strip())] = unquote(value.strip())
    return pairs


def _headers(section: OtelSettings, env: Mapping[str, str]) -> dict[str, str]:
    if section.headers_env is not None:
        value = env.get(section.headers_env, "")
        if not value.strip():
            raise _refuse(f"{_FIELD}.headers_env", "names a variable that is not set or is empty")
        return _pairs(section.headers_env, value)
    found = _variable(env, f"{_TRACES}HEADERS", f"{_OTLP}HEADERS")
    return {} if found is None else _pairs(*found)


def _number(
    key: str, value: int | None, env: Mapping[str, str], names: tuple[str, ...], default: int
) -> int:
    """A key's value, else the first variable's, else ``default``; a variable holds a
    positive integer within the key's bound."""
    if value is not None:
        return value
    found = _variable(env, *names)
    if found is None:
        return default
    name, text = found
    maximum = {
        "export_timeout_ms": MAX_EXPORT_TIMEOUT_MS,
        "schedule_delay_ms": MAX_SCHEDULE_DELAY_MS,
    }.get(key, MAX_QUEUE_SIZE)
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= maximum:
        raise _refuse(name, f"must be an integer from 1 to {maximum}")
    return int(text)


def _sampler(section: OtelSettings, env: Mapping[str, str]) -> tuple[str, float]:
    sampler = section.sampler
    if sampler is None:
        found = _variable(env, "OTEL_TRACES_SAMPLER")
        sampler = "parentbased_always_on" if found is None else found[1].lower()
        if sampler not in TRACE_SAMPLERS:
            raise _refuse("OTEL_TRACES_SAMPLER", "must be one of: " + ", ".join(TRACE_SAMPLERS))
    if section.sampler_arg is not None:
        return sampler, section.sampler_arg
    found = _variable(env, "OTEL_TRACES_SAMPLER_ARG")
    if found is None or not sampler.endswith("traceidratio"):
        return sampler, 1.0
    try:
        ratio = float(found[1])
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        raise _refuse("OTEL_TRACES_SAMPLER_ARG", "must be a number from 0 to 1")
    return sampler, ratio


def resolve_export(section: OtelSettings, env: Mapping[str, str]) -> TraceExport | None:
    """The export ``section`` and ``env`` ask for, or ``None`` when traces are off.

    ``section`` passed the config checks; the variables are checked here (``configuration``
    errors naming the variable)."""
    if not _enabled(section, env):
        return None
    protocol = _protocol(section, env)
    sampler, ratio = _sampler(section, env)
    resource_text = _variable(env, "OTEL_RESOURCE_ATTRIBUTES")
    resource = {} if resource_text is None else _pairs(*resource_text)
    service = section.service_name
    if service is None:
        found = _variable(env, "OTEL_SERVICE_NAME")
        service = found[1] if found else resource.get("service.name", DEFAULT_SERVICE_NAME)
    queue = _number(
        "max_queue_size", section.max_queue_size, env, ("OTEL_BSP_MAX_QUEUE_SIZE",), 2048
    )
    batch = _number(
        "max_export_batch_size",
        section.max_export_batch_size,
        env,
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE",),
        min(512, queue),
    )
    return TraceExport(
        endpoint=_endpoint(section, env, protocol),
        protocol=protocol,
        service_name=service,
        sampler=sampler,
        sampler_arg=ratio,
        export_timeout_ms=_number(
            "export_timeout_ms",
            section.export_timeout_ms,
            env,
            (f"{_TRACES}TIMEOUT", f"{_OTLP}TIMEOUT"),
            10_000,
        ),
        schedule_delay_ms=_number(
            "schedule_delay_ms", section.schedule_delay_ms, env, ("OTEL_BSP_SCHEDULE_DELAY",), 5000
        ),
        max_queue_size=queue,
        max_export_batch_size=min(batch, queue),
        explicit=section.enabled is True,
        headers=_headers(section, env),
        resource=resource,
    )
