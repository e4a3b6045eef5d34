"""Webhook delivery metrics, a collector of their own on the app's metrics registry.

* ``<prefix>_webhook_deliveries_total{outcome}``: attempts by outcome, counted by the
  instance that made them: ``delivered`` (2xx), ``retried`` (failed, due again later),
  ``failed`` (failed past the retry period: given up, kept for the admin);
* ``<prefix>_webhook_backlog``: deliveries not yet delivered nor given up, in the shared
  outbox (every instance reports the same database, as of its last poll);
* ``<prefix>_webhook_oldest_pending_age_seconds``: how long the oldest of them has waited
  (0 when there is none): the series an alert on a stuck receiver watches.

Labels hold the outcome only, never an endpoint URL or an event id.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from imagebridge.storage.records import OutboxStatistics

__all__ = ["OUTCOMES", "PREFIX", "WebhookMetrics"]

PREFIX = "imagegen_bridge"
OUTCOMES = ("delivered", "retried", "failed")


class WebhookMetrics(Collector):
    """Counts attempt outcomes (:meth:`record` is the dispatcher's observer) and reads the
    backlog at scrape time."""

    def __init__(
        self,
        backlog: Callable[[], OutboxStatistics | None],
        *,
        prefix: str = PREFIX,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self._backlog = backlog
        self._prefix = prefix
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._outcomes = dict.fromkeys(OUTCOMES, 0)

    def record(self, outcome: str) -> None:
        if outcome in self._outcomes:
            self._outcomes[outcome] += 1

    def collect(self) -> Iterator[Metric]:
        deliveries = CounterMetricFamily(
            f"{self._prefix}_webhook_deliveries",
            "Webhook delivery attempts by outcome (delivered, retried, failed: given up).",
            labels=("outcome",),
        )
        for outcome in OUTCOMES:
            deliveries.add_metric([outcome], float(self._outcomes[outcome]))
        yield deliveries
        stats = self._backlog()
        if stats is None:
            return
        yield GaugeMetricFamily(
            f"{self._prefix}_webhook_backlog",
            "Webhook deliveries not yet delivered nor given up.",
            value=float(stats.pending),
        )
        oldest = stats.oldest_created_at
        age = 0.0 if oldest is None else max(0.0, (self._clock_ms() - oldest) / 1000)
        yield GaugeMetricFamily(
            f"{self._prefix}_webhook_oldest_pending_age_seconds",
            "Age of the oldest webhook delivery not yet delivered nor given up.",
            value=age,
        )
