"""Prometheus exposition for image operations, on a per-app registry.

Counters and histograms are kept here as plain numbers and rendered by a custom
collector, so the families, label sets and ``le`` spellings are exactly the original's
and every app (and every test server) has its own registry. Gauges for queue depth and
circuit breakers are read from the runtime at scrape time. Labels hold provider names,
configured account names and error codes only — never prompts, tokens or ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client import generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from imagebridge.engine.provider import Provider
from imagebridge.engine.runtime import ImageRuntime
from imagebridge.storage.records import KeyRecord, KeyUsage

__all__ = ["BUCKETS_SECONDS", "METRICS_CONTENT_TYPE", "BridgeMetrics"]

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS_SECONDS: tuple[float, ...] = (0.1, 0.5, 1, 5, 10, 30, 60, 120, 180, 300, 600, 1800)
_BREAKER_STATES = ("closed", "open", "half_open")
_LABELS = ("provider", "result", "code")
LabelKey = tuple[str, str, str]


@dataclass(slots=True)
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS_SECONDS))
    total: int = 0
    sum_seconds: float = 0.0

    def observe(self, seconds: float) -> None:
        for index, bound in enumerate(BUCKETS_SECONDS):
            if seconds <= bound:
                self.counts[index] += 1
                break
        self.total += 1
        self.sum_seconds += seconds

    def buckets(self) -> list[tuple[str, float]]:
        cumulative = 0
        out: list[tuple[str, float]] = []
        for bound, count in zip(BUCKETS_SECONDS, self.counts, strict=True):
            cumulative += count
            out.append((f"{bound:.3f}", float(cumulative)))
        out.append(("+Inf", float(self.total)))
        return out


@dataclass(slots=True)
class _Series:
    requests: int = 0
    generated_bytes: int = 0
    normalizations: int = 0
    operation: _Histogram = field(default_factory=_Histogram)
    provider: _Histogram = field(default_factory=_Histogram)
    queue: _Histogram = field(default_factory=_Histogram)


class BridgeMetrics(Collector):
    """Operation metrics plus scrape-time runtime gauges."""

    def __init__(
        self,
        runtime: ImageRuntime,
        providers: Callable[[], Sequence[Provider]],
    ) -> None:
        self._runtime = runtime
        self._providers = providers
        self._series: dict[LabelKey, _Series] = {}
        self._key_images: dict[tuple[str, str], int] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

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

    def record_key_usage(self, record: KeyRecord, usage: KeyUsage) -> None:
        """One settled outcome on an API key, labelled by the key's name (bounded by
        ``server.keys.max_keys``; never the secret or its prefix)."""
        for outcome in ("requested", "delivered", "failed", "unknown"):
            count = getattr(usage, outcome)
            if count:
                label = (record.name, outcome)
                self._key_images[label] = self._key_images.get(label, 0) + count

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # -- Collector ----------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        yield from self._operation_families()
        yield from self._runtime_families()
        if self._key_images:
            images = CounterMetricFamily(
                "imagebridge_key_images",
                "Images per API key name and outcome (requested, delivered, failed, unknown).",
                labels=("key", "outcome"),
            )
            for labels in sorted(self._key_images):
                images.add_metric(list(labels), self._key_images[labels])
            yield images

    def _operation_families(self) -> Iterator[Metric]:
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
        histograms = {
            "operation": HistogramMetricFamily(
                "imagegen_bridge_operation_duration_seconds",
                "Total time per image operation.",
                labels=_LABELS,
            ),
            "provider": HistogramMetricFamily(
                "imagegen_bridge_provider_duration_seconds",
                "Provider time per successful image operation.",
                labels=_LABELS,
            ),
            "queue": HistogramMetricFamily(
                "imagegen_bridge_queue_duration_seconds",
                "Admission queue time per successful image operation.",
                labels=_LABELS,
            ),
        }
        for key in sorted(self._series):
            series = self._series[key]
            labels = list(key)
            requests.add_metric(labels, series.requests)
            histograms["operation"].add_metric(
                labels, series.operation.buckets(), series.operation.sum_seconds
            )
            if key[1] == "success":
                generated.add_metric(labels, series.generated_bytes)
                normalizations.add_metric(labels, series.normalizations)
                histograms["provider"].add_metric(
                    labels, series.provider.buckets(), series.provider.sum_seconds
                )
                histograms["queue"].add_metric(
                    labels, series.queue.buckets(), series.queue.sum_seconds
                )
        yield requests
        yield histograms["operation"]
        yield histograms["provider"]
        yield histograms["queue"]
        yield generated
        yield normalizations

    def _runtime_families(self) -> Iterator[Metric]:
        queue = GaugeMetricFamily(
            "imagegen_bridge_queue_depth",
            "Operations waiting for admission.",
            labels=("scope", "provider"),
        )
        snapshot = self._runtime.queue_snapshot()
        queue.add_metric(["global", "none"], float(snapshot["global_queued"]))
        for name, depth in sorted(snapshot["providers_queued"].items()):
            queue.add_metric(["provider", name], float(depth))
        yield queue

        restarts = CounterMetricFamily(
            "imagegen_bridge_provider_restarts",
            "Provider child-process restarts.",
            labels=("provider",),
        )
        for provider in self._providers():
            count = provider.restart_count()
            if count is not None:
                restarts.add_metric([provider.name], float(count))
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
        for name, breaker in sorted(self._runtime.breaker_snapshot().items()):
            for candidate in _BREAKER_STATES:
                state.add_metric([name, candidate], 1.0 if breaker["state"] == candidate else 0.0)
            rejections.add_metric([name], float(breaker["rejected_calls"]))
            transitions.add_metric([name], float(breaker["transitions"]))
        yield state
        yield rejections
        yield transitions
        yield from self._account_families()

    def _account_families(self) -> Iterator[Metric]:
        """Per upstream account (an account pool): only when some provider has accounts."""
        rows = [
            (provider.name, counters)
            for provider in self._providers()
            for counters in provider.account_counters()
        ]
        if not rows:
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
        for provider, counters in sorted(rows, key=lambda row: (row[0], row[1].account)):
            calls.add_metric([provider, counters.account, "success"], float(counters.succeeded))
            calls.add_metric([provider, counters.account, "error"], float(counters.failed))
            ready.add_metric([provider, counters.account], 1.0 if counters.ready else 0.0)
            in_flight.add_metric([provider, counters.account], float(counters.in_flight))
        yield calls
        yield ready
        yield in_flight
