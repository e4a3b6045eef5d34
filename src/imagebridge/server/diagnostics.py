"""``/v1/diagnostics``: redacted operator state (api.md §11).

Everything here is counts, states, names of configured things and provenance *sources*:
never credentials, prompts, request or session identifiers, or file-system paths.
Readiness errors are passed through an allow-list of detail keys, because a provider's
error details may legitimately name a path or an upstream id that an operator page must
not show. A provider may add extras (for example its quota windows) through an optional
``async def diagnostics() -> dict`` method; they appear under ``providers_detail``.
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
from imagebridge.engine.registry import ProviderReadiness
from imagebridge.providers.base import Provider, diagnostics_owner
from imagebridge.server.models import (
    CircuitBreakerDiagnostics,
    ConfigurationDiagnostics,
    ConfigurationOrigin,
    ListenerScope,
    OperatorDiagnostics,
    OperatorEventHistory,
    ProviderReadinessStatus,
    RuntimeDiagnostics,
)
from imagebridge.server.state import BridgeState

__all__ = ["build_diagnostics", "listener_scope", "redacted_error"]

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


async def build_diagnostics(state: BridgeState) -> OperatorDiagnostics:
    config = state.config
    server = config.server
    listener = state.options.listener
    runtime = state.runtime
    queues = runtime.queue_snapshot()
    providers = state.providers()
    details = await asyncio.gather(
        *(_provider_detail(p, state.options.diagnostics_timeout) for p in providers)
    )
    jobs = None if state.jobs is None else await state.jobs.jobs.statistics()
    return OperatorDiagnostics(
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
        runtime=RuntimeDiagnostics(
            global_queued=queues["global_queued"],
            providers_queued=dict(queues["providers_queued"]),
            circuit_breakers={
                name: CircuitBreakerDiagnostics.model_validate(snapshot)
                for name, snapshot in runtime.breaker_snapshot().items()
            },
        ),
        providers=_readiness(await state.readiness.latest(), runtime.registry.names),
        events=OperatorEventHistory.model_validate(state.events.snapshot()),
        providers_detail={
            provider.name: detail
            for provider, detail in zip(providers, details, strict=True)
            if detail is not None
        },
    )
