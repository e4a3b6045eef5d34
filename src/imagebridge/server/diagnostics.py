"""``/v1/diagnostics`` and ``/v1/diagnostics/extended``: redacted operator state
(docs/operations.md §4).

Everything here is counts, states, names of configured things and provenance *sources*:
never credentials, prompts, request or session identifiers, or file-system paths.
Readiness errors are passed through an allow-list of detail keys, because a provider's
error details may legitimately name a path or an upstream id that an operator page must
not show. A provider may add extras (for example its quota windows) through an optional
``async def diagnostics() -> dict`` method; they appear under ``providers_detail``.

One snapshot, :func:`build_extended_diagnostics`, holds everything; the original's
document (:func:`build_diagnostics`) is that snapshot with imagebridge's additions left
out, so its strict clients decode it.

The extended document is the operator's (the admin's only, with named keys). A named key
reading ``/v1/diagnostics`` gets the same shape with only what concerns it
(:func:`key_view`, docs/keys.md "Operator views"): providers' readiness, queues and
limits as everyone sees them, its own recent requests; not the job manager's counts (the
whole team's work), not where the operator's settings came from.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
from typing import Any

from imagebridge._version import __version__
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.response import BridgeErrorBody
from imagebridge.engine.provider import Provider, diagnostics_owner
from imagebridge.engine.registry import ProviderReadiness
from imagebridge.engine.storage_faults import STORAGE_HEALTH
from imagebridge.server.models import (
    CircuitBreakerDiagnostics,
    ConfigurationDiagnostics,
    ConfigurationOrigin,
    ExtendedDiagnostics,
    ExtendedJobManagerDiagnostics,
    ExtendedRuntimeDiagnostics,
    JobManagerDiagnostics,
    ListenerScope,
    OperatorDiagnostics,
    OperatorEventHistory,
    ProviderReadinessStatus,
    RuntimeDiagnostics,
    SizeMatchDiagnostics,
    StorageDiagnostics,
)
from imagebridge.server.state import BridgeState

__all__ = ["build_diagnostics", "build_extended_diagnostics", "listener_scope", "redacted_error"]

logger = logging.getLogger("imagebridge.server")

SAFE_DETAIL_KEYS = frozenset(
    {"retry_after_ms", "circuit_state", "outcome", "http_status", "stage", "limit", "field"}
)
MAX_DETAIL_BYTES = 64 * 1024


def listener_scope(listener: tuple[str, int] | None) -> ListenerScope:
    if listener is None:
        return "embedded"
    host = listener[0].strip("[]")
    if host == "localhost":
        return "loopback"
    try:
        return "loopback" if ipaddress.ip_address(host).is_loopback else "remote"
    except ValueError:
        return "unknown"


def redacted_error(error: BridgeError) -> BridgeErrorBody:
    details = {key: value for key, value in error.details.items() if key in SAFE_DETAIL_KEYS}
    return BridgeErrorBody(
        code=error.code,
        message=error.message,
        retryable=error.retryable,
        provider=error.provider,
        details=details,
        suggestions=list(error.suggestions),
    )


def _readiness(
    results: list[ProviderReadiness] | None, names: list[str]
) -> list[ProviderReadinessStatus]:
    if results is None:
        pending = BridgeError("internal", "provider readiness has not been probed yet")
        return [
            ProviderReadinessStatus(
                provider=name, status="not_ready", error=redacted_error(pending)
            )
            for name in names
        ]
    return [
        ProviderReadinessStatus(
            provider=result.provider,
            status="ready" if result.ready else "not_ready",
            error=None if result.error is None else redacted_error(result.error),
        )
        for result in results
    ]


async def _provider_detail(provider: Provider, timeout: float) -> dict[str, Any] | None:
    owner = diagnostics_owner(provider)
    if owner is None:
        return None
    try:
        value = await asyncio.wait_for(owner.diagnostics(), timeout)
        if not isinstance(value, dict):
            raise TypeError("provider diagnostics must be a mapping")
        if len(json.dumps(value, default=str)) > MAX_DETAIL_BYTES:
            raise ValueError("provider diagnostics are too large")
        return json.loads(json.dumps(value, default=str))  # type: ignore[no-any-return]
    except TimeoutError:
        return {"status": "unavailable", "reason": "timeout"}
    except Exception:
        logger.warning("provider diagnostics hook failed", extra={"provider": provider.name})
        return {"status": "unavailable", "reason": "error"}


# What the base document keeps: the original's top-level keys, and in each extended nested
# object only its base model's keys (an Extended* model added for another object goes here).
_BASE_FIELDS = set(OperatorDiagnostics.model_fields)
_ADDED_FIELDS = {
    "runtime": set(ExtendedRuntimeDiagnostics.model_fields) - set(RuntimeDiagnostics.model_fields),
    "jobs": set(ExtendedJobManagerDiagnostics.model_fields)
    - set(JobManagerDiagnostics.model_fields),
}


async def build_diagnostics(
    state: BridgeState, *, key_owner: str | None = None
) -> OperatorDiagnostics:
    """The original's document: exactly its keys, in every object; with ``key_owner``
    (a named key's scope), that key's view of it (:func:`key_view`)."""
    extended = await build_extended_diagnostics(
        state, provider_details=False, job_counts=key_owner is None
    )
    document = OperatorDiagnostics.model_validate(
        extended.model_dump(mode="json", include=_BASE_FIELDS, exclude=_ADDED_FIELDS)
    )
    return document if key_owner is None else key_view(document, state, key_owner)


def key_view(document: OperatorDiagnostics, state: BridgeState, owner: str) -> OperatorDiagnostics:
    """What a named key sees of the original's document, in the same shape: ``jobs`` left
    out (it is optional in the original: absent, as with jobs disabled), ``provenance``
    empty, and ``events`` its own requests only."""
    configuration = document.configuration.model_copy(update={"provenance": []})
    events = OperatorEventHistory.model_validate(state.events.snapshot(owner=owner))
    return document.model_copy(
        update={"configuration": configuration, "jobs": None, "events": events}
    )


async def build_extended_diagnostics(
    state: BridgeState, *, provider_details: bool = True, job_counts: bool = True
) -> ExtendedDiagnostics:
    """Everything: the original's document plus each addition (``ExtendedDiagnostics``).

    ``provider_details=False`` skips the providers' hooks (the base document drops them, so
    it need not wait up to the hook timeout for them); ``job_counts=False`` skips the job
    store's counts (a key's view leaves them out).
    """
    config = state.config
    server = config.server
    listener = state.options.listener
    runtime = state.runtime
    queues = runtime.queue_snapshot()
    details: dict[str, dict[str, Any]] = {}
    if provider_details:
        providers = state.providers()
        answers = await asyncio.gather(
            *(_provider_detail(p, state.options.diagnostics_timeout) for p in providers)
        )
        details = {
            provider.name: answer
            for provider, answer in zip(providers, answers, strict=True)
            if answer is not None
        }
    jobs = None
    if state.jobs is not None and job_counts:
        manager = state.jobs.jobs
        jobs = ExtendedJobManagerDiagnostics.model_validate(
            {**await manager.statistics(), **await manager.queue_statistics()}
        )
    return ExtendedDiagnostics(
        bridge_version=__version__,
        configuration=ConfigurationDiagnostics(
            version=config.version,
            default_provider=config.default_provider,
            listener_scope=listener_scope(listener),
            listener_port=None if listener is None else listener[1],
            authentication_required=state.access.authentication_required,
            metrics_enabled=state.metrics is not None,
            jobs_enabled=state.jobs_enabled,
            max_connections=server.max_connections_value,
            max_body_bytes=server.max_body_bytes,
            read_timeout_ms=server.read_timeout_ms,
            write_timeout_ms=server.write_timeout_ms,
            provenance=[ConfigurationOrigin.model_validate(o.to_dict()) for o in state.origins],
        ),
        artifact_storage_enabled=True,
        jobs=jobs,
        runtime=ExtendedRuntimeDiagnostics(
            global_queued=queues["global_queued"],
            providers_queued=dict(queues["providers_queued"]),
            circuit_breakers={
                name: CircuitBreakerDiagnostics.model_validate(snapshot)
                for name, snapshot in runtime.breaker_snapshot().items()
            },
            size_match={
                provider: {
                    model: {
                        tier: SizeMatchDiagnostics.model_validate(r) for tier, r in tiers.items()
                    }
                    for model, tiers in models.items()
                }
                for provider, models in runtime.size_stats.snapshot().items()
            },
        ),
        providers=_readiness(await state.readiness.latest(), runtime.registry.names),
        events=OperatorEventHistory.model_validate(state.events.snapshot()),
        providers_detail=details,
        storage=StorageDiagnostics.model_validate(STORAGE_HEALTH.snapshot()),
    )
