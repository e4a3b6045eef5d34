"""The webhook service's settings: plain values the wiring reads from ``[server.webhooks]``."""

from __future__ import annotations

from dataclasses import dataclass, field

from imagebridge.webhooks.targets import TargetPolicy

__all__ = ["ConfiguredEndpoint", "WebhookSettings"]


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """Every bound of delivery (docs/webhooks.md explains each)."""

    targets: TargetPolicy = field(default_factory=TargetPolicy)
    timeout_ms: int = 10_000
    """One attempt, from DNS to the receiver's answer."""
    retry_period_secs: int = 86_400
    """How long a delivery is retried before it is marked failed."""
    retry_initial_ms: int = 5_000
    retry_max_interval_ms: int = 3_600_000
    lease_secs: int = 60
    """How long a claimed delivery stays this instance's; after it, any instance retries it."""
    max_concurrent: int = 8
    poll_interval_ms: int = 1_000
    max_payload_bytes: int = 65_536
    max_pending: int = 100_000
    max_endpoints: int = 100
    max_response_bytes: int = 65_536
    retention_secs: int = 604_800
    max_retained: int = 100_000

    @property
    def retry_period_ms(self) -> int:
        return self.retry_period_secs * 1000


@dataclass(frozen=True, slots=True)
class ConfiguredEndpoint:
    """One ``[server.webhooks.endpoints.<name>]`` table, its key resolved to an id."""

    name: str
    url: str
    secret_env: str
    event_types: tuple[str, ...]
    key_id: str | None = None

    @property
    def id(self) -> str:
        return "whcfg_" + self.name
