"""What the routes share: the engine, the access policy, readiness, events and metrics.

One :class:`BridgeState` per app, stored on ``app.state.bridge``. Tests reach the
providers through :meth:`BridgeState.find_provider` (it looks through decorators such as
fan-out), which is how a test proves that a client disconnect cancelled upstream work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from starlette.requests import Request

from imagebridge.application import Application
from imagebridge.application.job_services import JobServices
from imagebridge.config.loader import ConfigOrigin
from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError
from imagebridge.engine.provider import Provider
from imagebridge.engine.runtime import ImageRuntime
from imagebridge.server.auth import AccessPolicy
from imagebridge.server.events import DEFAULT_EVENT_CAPACITY, OperatorEvents
from imagebridge.server.metrics import BridgeMetrics
from imagebridge.server.readiness import ReadinessMonitor
from imagebridge.server.recovery import ArtifactRecovery
from imagebridge.server.shutdown import Drain
from imagebridge.webhooks import Resolver, WebhookService

__all__ = ["BridgeState", "ServerOptions", "bridge_state", "unwrap_provider"]

P = TypeVar("P", bound=Provider)


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Knobs that are not configuration keys: intervals (shortened by tests) and wiring."""

    heartbeat_interval: float | None = None
    """Seconds of SSE idleness before a ``: heartbeat`` comment (``None``: the config's
    ``server.stream_heartbeat_ms``)."""
    stream_queue_size: int = 4
    """SSE events buffered per stream before the provider is made to wait."""
    readiness_interval: float = 30.0
    readiness_timeout: float = 10.0
    readiness_stale_after: float = 90.0
    event_capacity: int = DEFAULT_EVENT_CAPACITY
    diagnostics_timeout: float = 5.0
    """Bound on each provider's optional ``diagnostics()`` hook."""
    listener: tuple[str, int] | None = None
    """The bound address, for diagnostics; ``None`` reports an embedded app."""
    env: Mapping[str, str] | None = None
    """Where the bearer token variable is read (default: the process environment)."""
    webhook_resolver: Resolver | None = None
    """How webhook targets' names resolve (default: the OS; tests give fixed answers)."""


@dataclass(slots=True)
class BridgeState:
    config: BridgeConfig
    application: Application
    options: ServerOptions
    access: AccessPolicy
    readiness: ReadinessMonitor
    events: OperatorEvents
    metrics: BridgeMetrics | None
    origins: list[ConfigOrigin] = field(default_factory=list)
    jobs_enabled: bool = False
    """Whether the jobs, presets and artifact routes are mounted (``server.jobs.enabled``)."""
    jobs: JobServices | None = None
    """The job manager and preset service, once the lifespan has opened them."""
    recovery: ArtifactRecovery | None = None
    """Repairs half-done artifact writes at start and periodically (server/recovery.py)."""
    startup_error: BridgeError | None = None
    """Why the lifespan could not start the app (reported by ``run_server``)."""
    drain: Drain = field(default_factory=Drain)
    """Requests in flight, and whether the server is draining before it stops."""
    webhooks: WebhookService | None = None
    """The webhook outbox and its delivery loop (``server.webhooks.enabled``)."""

    @property
    def runtime(self) -> ImageRuntime:
        return self.application.runtime

    @property
    def heartbeat_interval(self) -> float:
        """Seconds of SSE idleness before a ``: heartbeat`` comment."""
        interval = self.options.heartbeat_interval
        if interval is None:
            return self.config.server.stream_heartbeat_ms / 1000
        return interval

    def providers(self) -> list[Provider]:
        return self.runtime.registry.providers()

    def find_provider(self, kind: type[P]) -> P | None:
        """The first registered provider of ``kind``, looking through decorators."""
        for provider in self.providers():
            found = unwrap_provider(provider, kind)
            if found is not None:
                return found
        return None


def unwrap_provider(provider: object, kind: type[P]) -> P | None:
    seen = 0
    current: object | None = provider
    while current is not None and seen < 8:
        if isinstance(current, kind):
            return current
        current = getattr(current, "inner", None)
        seen += 1
    return None


def bridge_state(request: Request) -> BridgeState:
    state = request.app.state.bridge
    assert isinstance(state, BridgeState)
    return state
