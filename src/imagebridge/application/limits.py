"""Config tables → the engine's admission and breaker settings (shared by the wiring modules)."""

from __future__ import annotations

from imagebridge.config.model import CircuitBreakerSettings, ConcurrencySettings
from imagebridge.engine.admission import GateLimits
from imagebridge.engine.breaker import BreakerConfig

__all__ = ["breaker_config", "gate_limits"]


def gate_limits(settings: ConcurrencySettings) -> GateLimits:
    return GateLimits(
        settings.max_concurrent_value, settings.max_queued_value, settings.retry_after_ms
    )


def breaker_config(settings: CircuitBreakerSettings) -> BreakerConfig:
    return BreakerConfig(
        enabled=settings.enabled,
        failure_threshold=settings.failure_threshold,
        open_duration_ms=settings.open_duration_ms,
        half_open_max_calls=settings.half_open_max_calls,
        success_threshold=settings.success_threshold,
    )
