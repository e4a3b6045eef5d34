"""The original's families, exactly: image operations of the synchronous routes, and the
runtime's admission queues, child restarts and circuit breakers (docs/operations.md §4).

Only ``/v1/images``, its stream and the OpenAI-compatible routes are recorded here, as the
original does; every surface (jobs too) is counted by :mod:`.images` under route labels.
The per-account series of a pool are imagebridge's addition, kept beside the breakers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from imagebridge.engine.provider import AccountCounters, Provider
from imagebridge.engine.runtime import ImageRuntime
from imagebridge.server.metrics.histogram import Histogram

__all__ = ["OperationCounters", "RuntimeReading"]

_BREAKER_STATES = ("closed", "open", "half_open")
_LABELS = ("provider", "result", "code")
LabelKey = tuple[str, str, str]


@dataclass(slots=True)
class _Series:
    requests: int = 0
    generated_bytes: int = 0
    normalizations: int = 0
    operation: Histogram = field(default_factory=Histogram)
    provider: Histogram = field(default_factory=Histogram)
    queue: Histogram = field(default_factory=Histogram)

    def copy(self) -> _Series:
        return _Series(
            self.requests,
            self.generated_bytes,
            self.normalizations,
            self.operation.copy(),
            self.provider.copy(),
            self.queue.copy(),
        )


class OperationCounters:
    """``imagegen_bridge_requests_total`` and its histograms, by provider and outcome."""

    def __init__(self) -> None:
        self._series: dict[LabelKey, _Series] = {}

    def record(
        self,
        *,
        provider: str,
        code: str | None,
        total_ms: int,
        provider_ms: int | None = None,
        queue_ms: int | None = None,
        generated_bytes: int = 0,
        normalizations: int = 0,
    ) -> None:
        """One finished image operation (``code`` ``None`` = success)."""
        key = (provider, "success" if code is None else "error", code or "none")
        series = self._series.setdefault(key, _Series())
        series.requests += 1
        series.operation.observe(total_ms / 1000)
        if code is None:
            series.provider.observe((provider_ms or 0) / 1000)
            series.queue.observe((queue_ms or 0) / 1000)
            series.generated_bytes += generated_bytes
            series.normalizations += normalizations

    def snapshot(self) -> Callable[[], Iterator[Metric]]:
        """A copy taken now; its families may be built on any thread."""
        series = {key: value.copy() for key, value in self._series.items()}
        return lambda: _operation_families(series)


def _operation_families(all_series: dict[LabelKey, _Series]) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        "imagegen_bridge_requests", "Image operations by outcome.", labels=_LABELS
    )
    generated = CounterMetricFamily(
        "imagegen_bridge_generated_bytes", "Verified image bytes returned.", labels=_LABELS
    )
    normalizations = CounterMetricFamily(
        "imagegen_bridge_normalizations",
        "Parameter normalizations applied to successful operations.",
        labels=_LABELS,
    )
    operation = HistogramMetricFamily(
        "imagegen_bridge_operation_duration_seconds",
        "Total time per image operation.",
        labels=_LABELS,
    )
    provider = HistogramMetricFamily(
        "imagegen_bridge_provider_duration_seconds",
        "Provider time per successful image operation.",
        labels=_LABELS,
    )
    queue = HistogramMetricFamily(
        "imagegen_bridge_queue_duration_seconds",
        "Admission queue time per successful image operation.",
        labels=_LABELS,
    )
    for key in sorted(all_series):
        series = all_series[key]
        labels = list(key)
        requests.add_metric(labels, series.requests)
        operation.add_metric(labels, series.operation.buckets(), series.operation.sum_seconds)
        if key[1] == "success":
            generated.add_metric(labels, series.generated_bytes)
            normalizations.add_metric(labels, series.normalizations)
            provider.add_metric(labels, series.provider.buckets(), series.provider.sum_seconds)
            queue.add_metric(labels, series.queue.buckets(), series.queue.sum_seconds)
    yield from (requests, operation, provider, queue, generated, normalizations)


@dataclass(frozen=True, slots=True)
class RuntimeReading:
    """The runtime's state at one moment: queues, limits, restarts, breakers, accounts."""

    global_queued: int
    providers_queued: dict[str, int]
    limits: list[tuple[str, str, int | None, int | None, int]]
    """``(scope, provider, max_concurrent, max_queued, running)`` of each admission gate."""
    restarts: dict[str, int]
    breakers: dict[str, dict[str, Any]]
    accounts: list[tuple[str, AccountCounters]]

    @classmethod
    def read(cls, runtime: ImageRuntime, providers: Sequence[Provider]) -> RuntimeReading:
        queues = runtime.queue_snapshot()
        gates = [("global", "none", runtime.global_gate)]
        gates += [("provider", name, gate) for name, gate in runtime.provider_gates.items()]
        restarts = {}
        for provider in providers:
            count = provider.restart_count()
            if count is not None:
                restarts[provider.name] = count
        return cls(
            global_queued=queues["global_queued"],
            providers_queued=dict(queues["providers_queued"]),
            limits=[
                (scope, name, gate.max_concurrent, gate.max_queued, gate.active)
                for scope, name, gate in gates
            ],
            restarts=restarts,
            breakers=runtime.breaker_snapshot(),
            accounts=[
                (provider.name, counters)
                for provider in providers
                for counters in provider.account_counters()
            ],
        )

    def families(self) -> Iterator[Metric]:
        queue = GaugeMetricFamily(
            "imagegen_bridge_queue_depth",
            "Operations waiting for admission.",
            labels=("scope", "provider"),
        )
        queue.add_metric(["global", "none"], float(self.global_queued))
        for name, depth in sorted(self.providers_queued.items()):
            queue.add_metric(["provider", name], float(depth))
        yield queue
        yield from self._limit_families()

        restarts = CounterMetricFamily(
            "imagegen_bridge_provider_restarts",
            "Provider child-process restarts.",
            labels=("provider",),
        )
        for name, count in sorted(self.restarts.items()):
            restarts.add_metric([name], float(count))
        yield restarts

        state = GaugeMetricFamily(
            "imagegen_bridge_circuit_state",
            "Circuit breaker state (one-hot).",
            labels=("provider", "state"),
        )
        rejections = CounterMetricFamily(
            "imagegen_bridge_circuit_rejections",
            "Calls rejected by an open circuit.",
            labels=("provider",),
        )
        transitions = CounterMetricFamily(
            "imagegen_bridge_circuit_transitions",
            "Circuit breaker state transitions.",
            labels=("provider",),
        )
        for name, breaker in sorted(self.breakers.items()):
            for candidate in _BREAKER_STATES:
                state.add_metric([name, candidate], 1.0 if breaker["state"] == candidate else 0.0)
            rejections.add_metric([name], float(breaker["rejected_calls"]))
            transitions.add_metric([name], float(breaker["transitions"]))
        yield state
        yield rejections
        yield transitions
        yield from self._account_families()

    def _limit_families(self) -> Iterator[Metric]:
        """imagebridge's addition: each gate's bounds and running count, so an alert can
        compare ``queue_depth`` with its limit."""
        labels = ("scope", "provider")
        queue_limit = GaugeMetricFamily(
            "imagegen_bridge_queue_limit",
            "Most operations that may wait for admission (absent: unlimited).",
            labels=labels,
        )
        running = GaugeMetricFamily(
            "imagegen_bridge_admitted", "Operations admitted and running now.", labels=labels
        )
        running_limit = GaugeMetricFamily(
            "imagegen_bridge_admitted_limit",
            "Most operations admitted at once (absent: unlimited).",
            labels=labels,
        )
        for scope, name, max_concurrent, max_queued, active in self.limits:
            running.add_metric([scope, name], float(active))
            if max_queued is not None:
                queue_limit.add_metric([scope, name], float(max_queued))
            if max_concurrent is not None:
                running_limit.add_metric([scope, name], float(max_concurrent))
        yield from (queue_limit, running, running_limit)

    def _account_families(self) -> Iterator[Metric]:
        """Per upstream account (an account pool): only when some provider has accounts."""
        if not self.accounts:
            return
        labels = ("provider", "account")
        calls = CounterMetricFamily(
            "imagegen_bridge_account_calls",
            "Upstream calls per pool account, by result.",
            labels=(*labels, "result"),
        )
        ready = GaugeMetricFamily(
            "imagegen_bridge_account_ready",
            "Whether a pool account takes calls now (1) or is skipped (0).",
            labels=labels,
        )
        in_flight = GaugeMetricFamily(
            "imagegen_bridge_account_in_flight",
            "Upstream calls running on a pool account.",
            labels=labels,
        )
        rows = sorted(self.accounts, key=lambda row: (row[0], row[1].account))
        for provider, counters in rows:
            calls.add_metric([provider, counters.account, "success"], float(counters.succeeded))
            calls.add_metric([provider, counters.account, "error"], float(counters.failed))
            ready.add_metric([provider, counters.account], 1.0 if counters.ready else 0.0)
            in_flight.add_metric([provider, counters.account], float(counters.in_flight))
        yield calls
        yield ready
        yield in_flight
