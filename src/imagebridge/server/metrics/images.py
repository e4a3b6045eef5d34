"""Every image, whatever the surface: the :class:`~imagebridge.jobs.outcomes.OutcomeObserver`
the server wires into its routes and its job runner.

Three families, labelled by ``route`` (``images``, ``stream``, ``openai``, ``jobs``, later
``responses``):

* ``imagegen_bridge_images_total{route,provider,model,account,key,outcome}``: images, each
  counted once, as ``delivered``, ``failed`` (not billed) or ``unknown`` (the upstream call
  may have run); a success with fewer images than asked counts the rest as failed.
* ``imagegen_bridge_image_operations_total{route,provider,key,code}``: operations (a request
  or a job's run), ``code`` ``none`` or the error code.
* ``imagegen_bridge_image_operation_duration_seconds{route,provider,result}``: the
  operation's own time; and ``imagegen_bridge_job_wait_duration_seconds{provider}``, a
  job's wait in the durable queue (whole seconds: the queue stores seconds).

``key`` and ``model`` are bounded (:class:`~.labels.LabelBudget`); ``account`` holds
configured pool account names only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from imagebridge.jobs.outcomes import ImageOutcome, image_shares
from imagebridge.server.metrics.histogram import Histogram
from imagebridge.server.metrics.labels import DEFAULT, NONE, LabelBudget

__all__ = ["ImageCounters"]

_IMAGE_LABELS = ("route", "provider", "model", "account", "key", "outcome")
_OPERATION_LABELS = ("route", "provider", "key", "code")
_DURATION_LABELS = ("route", "provider", "result")


class ImageCounters:
    """The counters behind the three families; :meth:`image_outcome` is the observer."""

    def __init__(self, *, max_key_labels: int, max_model_labels: int) -> None:
        self.keys = LabelBudget(max_key_labels)
        self.models = LabelBudget(max_model_labels)
        self._images: dict[tuple[str, ...], int] = {}
        self._operations: dict[tuple[str, ...], int] = {}
        self._durations: dict[tuple[str, ...], Histogram] = {}
        self._waits: dict[str, Histogram] = {}

    def image_outcome(self, outcome: ImageOutcome) -> None:
        key = self.keys.label(outcome.key)
        model = DEFAULT if outcome.model is None else self.models.label(outcome.model)
        for account, result, count in image_shares(outcome):
            labels = (outcome.route, outcome.provider, model, account or NONE, key, result)
            self._images[labels] = self._images.get(labels, 0) + count
        operation = (outcome.route, outcome.provider, key, outcome.code or "none")
        self._operations[operation] = self._operations.get(operation, 0) + 1
        result = "success" if outcome.code is None else "error"
        timing = (outcome.route, outcome.provider, result)
        self._durations.setdefault(timing, Histogram()).observe(max(0.0, outcome.seconds))
        if outcome.queued_seconds is not None:
            wait = self._waits.setdefault(outcome.provider, Histogram())
            wait.observe(max(0.0, outcome.queued_seconds))

    def snapshot(self) -> Callable[[], Iterator[Metric]]:
        """A copy taken now; its families may be built on any thread."""
        images = dict(self._images)
        operations = dict(self._operations)
        durations = {labels: value.copy() for labels, value in self._durations.items()}
        waits = {labels: value.copy() for labels, value in self._waits.items()}
        return lambda: _families(images, operations, durations, waits)


def _families(
    images: dict[tuple[str, ...], int],
    operations: dict[tuple[str, ...], int],
    durations: dict[tuple[str, ...], Histogram],
    waits: dict[str, Histogram],
) -> Iterator[Metric]:
    counted = CounterMetricFamily(
        "imagegen_bridge_images",
        "Images by surface, provider, model, pool account, API key name and outcome "
        "(delivered, failed, unknown).",
        labels=_IMAGE_LABELS,
    )
    for labels in sorted(images):
        counted.add_metric(list(labels), float(images[labels]))
    yield counted
    runs = CounterMetricFamily(
        "imagegen_bridge_image_operations",
        "Image operations (requests and job runs) by surface, provider, key and error code.",
        labels=_OPERATION_LABELS,
    )
    for labels in sorted(operations):
        runs.add_metric(list(labels), float(operations[labels]))
    yield runs
    timed = HistogramMetricFamily(
        "imagegen_bridge_image_operation_duration_seconds",
        "Time per image operation by surface (a job: its run, claim to outcome).",
        labels=_DURATION_LABELS,
    )
    for labels in sorted(durations):
        histogram = durations[labels]
        timed.add_metric(list(labels), histogram.buckets(), histogram.sum_seconds)
    yield timed
    waited = HistogramMetricFamily(
        "imagegen_bridge_job_wait_duration_seconds",
        "Time a job waited in the durable queue before an instance claimed it.",
        labels=("provider",),
    )
    for provider in sorted(waits):
        histogram = waits[provider]
        waited.add_metric([provider], histogram.buckets(), histogram.sum_seconds)
    yield waited
