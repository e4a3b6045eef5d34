"""Wire models owned by the server: health, readiness and operator diagnostics.

They document the routes in ``/v1/openapi.json`` and build the bodies, so the document
and the answers cannot drift apart. Contract models (requests, responses, capabilities)
live in :mod:`imagebridge.contract`.

``/v1/diagnostics`` carries exactly the original's keys (:class:`OperatorDiagnostics`): the
original's SDK decodes each of its objects into a dataclass, so one unknown key breaks it.
Everything imagebridge adds lives in :class:`ExtendedDiagnostics`
(``GET /v1/diagnostics/extended``), a superset built from the same snapshot. **Put a new
diagnostic there**, never in the base models (docs/api-decisions.md lists each addition).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from imagebridge.contract._base import ContractModel, StrictBool, StrictStr, omit_empty, omit_none
from imagebridge.contract.response import BridgeErrorBody

__all__ = [
    "CircuitBreakerDiagnostics",
    "ConfigurationDiagnostics",
    "ConfigurationOrigin",
    "ExtendedDiagnostics",
    "ExtendedJobManagerDiagnostics",
    "ExtendedRuntimeDiagnostics",
    "JobManagerDiagnostics",
    "LiveStatus",
    "OperatorDiagnostics",
    "OperatorEvent",
    "OperatorEventHistory",
    "ProviderReadinessStatus",
    "ReadinessStatus",
    "RuntimeDiagnostics",
    "SizeMatchDiagnostics",
    "StorageAreaFault",
    "StorageDiagnostics",
]

ListenerScope = Literal["loopback", "remote", "embedded", "unknown"]


class LiveStatus(ContractModel):
    status: Literal["live"] = "live"


class ReadinessStatus(ContractModel):
    status: Literal["ready", "not_ready"]


class ConfigurationOrigin(ContractModel):
    """Where one effective configuration leaf came from: never its value."""

    field: StrictStr
    source: Literal["default", "file", "environment", "override"]
    key: StrictStr


class ConfigurationDiagnostics(ContractModel):
    version: int | None = Field(default=None, ge=1, exclude_if=omit_none)
    default_provider: StrictStr | None = Field(default=None, exclude_if=omit_none)
    listener_scope: ListenerScope
    listener_port: int | None = Field(default=None, ge=0, le=65_535, exclude_if=omit_none)
    authentication_required: StrictBool
    metrics_enabled: StrictBool
    jobs_enabled: StrictBool
    max_connections: int | None = Field(ge=1)
    max_body_bytes: int = Field(ge=0)
    read_timeout_ms: int = Field(ge=0)
    write_timeout_ms: int = Field(ge=0)
    provenance: list[ConfigurationOrigin]


class CircuitBreakerDiagnostics(ContractModel):
    state: Literal["closed", "open", "half_open"]
    consecutive_failures: int = Field(ge=0)
    retry_after_ms: int = Field(ge=0)
    rejected_calls: int = Field(ge=0)
    transitions: int = Field(ge=0)


class RuntimeDiagnostics(ContractModel):
    global_queued: int = Field(ge=0)
    providers_queued: dict[str, int]


class SizeMatchDiagnostics(ContractModel):
    """One transport's measured size honesty for one model and size tier."""

    calls: int = Field(ge=0)
    matched: int = Field(ge=0)
    rate: float = Field(ge=0, le=1)


class ExtendedRuntimeDiagnostics(RuntimeDiagnostics):
    """Runtime state plus each provider's circuit breaker (the original sent these inside
    ``runtime``, where its own SDK's decoder refused them)."""

    circuit_breakers: dict[str, CircuitBreakerDiagnostics]
    size_match: dict[str, dict[str, dict[str, SizeMatchDiagnostics]]] = Field(default_factory=dict)
    """Per provider, model and size tier: how many of the last calls with a size ask
    delivered that size (``runtime.images.size_match_window``; issue 32)."""


class JobManagerDiagnostics(ContractModel):
    """Durable-job counts, sizes and bounds: the original's keys, no more."""

    total: int = Field(ge=0)
    queued: int = Field(ge=0)
    running: int = Field(ge=0)
    succeeded: int = Field(ge=0)
    failed: int = Field(ge=0)
    cancelled: int = Field(ge=0)
    interrupted: int = Field(ge=0)
    hidden: int = Field(ge=0)
    database_bytes: int = Field(ge=0)
    logical_bytes: int = Field(ge=0)
    active_workers: int = Field(ge=0)
    max_pending: int = Field(ge=0)
    max_running: int = Field(ge=0)
    retention_secs: int = Field(ge=0)
    max_retained: int = Field(ge=0)
    max_retained_bytes: int = Field(ge=0)
    max_database_bytes: int = Field(ge=0)


class ExtendedJobManagerDiagnostics(JobManagerDiagnostics):
    """Job statistics plus who runs what in shared-queue mode."""

    shared: StrictBool
    instance_id: StrictStr
    leases: dict[str, int] = Field(description="Running leases per instance id.")
    queued_by_provider: dict[str, int] = Field(
        description='Queued jobs per provider route ("*": jobs any instance may claim).'
    )


class ProviderReadinessStatus(ContractModel):
    provider: StrictStr
    status: Literal["ready", "not_ready"]
    error: BridgeErrorBody | None = Field(default=None, exclude_if=omit_none)


class OperatorEvent(ContractModel):
    sequence: int = Field(ge=1)
    timestamp_ms: int = Field(ge=0)
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "OTHER"]
    route: StrictStr
    status: int = Field(ge=100, le=599)
    duration_ms: int = Field(ge=0)


class OperatorEventHistory(ContractModel):
    capacity: int = Field(ge=1)
    dropped: int = Field(ge=0)
    items: list[OperatorEvent]


class OperatorDiagnostics(ContractModel):
    """Redacted operator state: no credentials, prompts, identifiers or paths."""

    bridge_version: StrictStr
    configuration: ConfigurationDiagnostics
    artifact_storage_enabled: StrictBool
    runtime: RuntimeDiagnostics
    jobs: JobManagerDiagnostics | None = Field(default=None, exclude_if=omit_none)
    providers: list[ProviderReadinessStatus]
    events: OperatorEventHistory


class StorageAreaFault(ContractModel):
    """The last storage fault of one area (``artifacts``, ``database``, ``staging``)."""

    reason: Literal["no_space", "io_error", "read_only"]
    since: int
    """When this fault was first seen (epoch seconds)."""
    last_seen: int
    failures: int
    """Writes it has refused since then."""


class StorageDiagnostics(ContractModel):
    """``degraded`` while a write area has refused a write for a full disk, an I/O error
    or a read-only filesystem and no write there has succeeded since (reads keep working)."""

    status: Literal["ok", "degraded"]
    areas: dict[str, StorageAreaFault] = Field(default_factory=dict)


class ExtendedDiagnostics(OperatorDiagnostics):
    """``GET /v1/diagnostics/extended``: everything ``/v1/diagnostics`` has, plus
    imagebridge's additions where they belong. The place for any new diagnostic."""

    runtime: ExtendedRuntimeDiagnostics
    jobs: ExtendedJobManagerDiagnostics | None = Field(default=None, exclude_if=omit_none)
    providers_detail: dict[str, dict[str, Any]] = Field(default_factory=dict, exclude_if=omit_empty)
    """Optional per-provider extras (e.g. quota windows) from a provider's
    ``diagnostics()`` hook, keyed by provider name."""
    storage: StorageDiagnostics = Field(default_factory=lambda: StorageDiagnostics(status="ok"))
    """The write areas' health: ``degraded`` with each faulty area's reason."""
