"""The app's Prometheus collector: every family, on a registry of its own.

Counters and histograms are kept as plain numbers and rendered by this custom collector,
so the families, label sets and ``le`` spellings are exactly as documented and every app
(and every test server) has its own registry. A scrape takes copies of the counters and
the runtime's state on the event loop (cheap: bounded dictionaries), then builds and
formats the text in a worker thread; gauges that need a store were read before, by
:meth:`BridgeMetrics.scrape` (:mod:`.gauges`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from imagebridge.engine.provider import Provider
from imagebridge.engine.runtime import ImageRuntime
from imagebridge.jobs.manager import JobManager
from imagebridge.jobs.outcomes import ImageOutcome
from imagebridge.keys import KeyService
from imagebridge.server.metrics.gauges import ScrapeGauges
from imagebridge.server.metrics.images import ImageCounters
from imagebridge.server.metrics.original import OperationCounters, RuntimeReading

__all__ = ["METRICS_CONTENT_TYPE", "BridgeMetrics"]

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Families = Callable[[], Iterator[Metric]]


class _Fixed(Collector):
    def __init__(self, parts: list[Families]) -> None:
        self._parts = parts

    def collect(self) -> Iterator[Metric]:
        for part in self._parts:
            yield from part()


def _render(parts: list[Families]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(parts))
    return generate_latest(registry)


class BridgeMetrics(Collector):
    """The original's operation metrics, every image by surface, and scrape-time gauges.

    :meth:`record` takes the original's synchronous operations; :meth:`image_outcome` is
    the :class:`~imagebridge.jobs.outcomes.OutcomeObserver` every surface reports to.
    """

    def __init__(
        self,
        runtime: ImageRuntime,
        providers: Callable[[], Sequence[Provider]],
        *,
        max_key_labels: int = 100,
        max_model_labels: int = 50,
        scrape_cache_ms: int = 10_000,
        scrape_timeout_ms: int = 2_000,
    ) -> None:
        self._runtime = runtime
        self._providers = providers
        self.operations = OperationCounters()
        self.images = ImageCounters(
            max_key_labels=max_key_labels, max_model_labels=max_model_labels
        )
        self.gauges = ScrapeGauges(
            self.images.keys, scrape_cache_ms / 1000, scrape_timeout_ms / 1000
        )
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
        """One finished synchronous image operation (``code`` ``None`` = success)."""
        self.operations.record(
            provider=provider,
            code=code,
            total_ms=total_ms,
            provider_ms=provider_ms,
            queue_ms=queue_ms,
            generated_bytes=generated_bytes,
            normalizations=normalizations,
        )

    def image_outcome(self, outcome: ImageOutcome) -> None:
        self.images.image_outcome(outcome)

    async def scrape(self, *, keys: KeyService | None, jobs: JobManager | None) -> bytes:
        """The exposition: store gauges refreshed (bounded), text built off the loop."""
        await self.gauges.refresh(keys=keys, jobs=jobs, providers=self._providers())
        parts = self._parts()
        return await asyncio.to_thread(_render, parts)

    def render(self) -> bytes:
        """The exposition from what is known now, on the calling thread (no store reads)."""
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        for part in self._parts():
            yield from part()

    def _parts(self) -> list[Families]:
        reading = RuntimeReading.read(self._runtime, self._providers())
        return [
            self.operations.snapshot(),
            reading.families,
            self.images.snapshot(),
            self.gauges.snapshot(),
        ]
