"""A job's trace on the instance that claimed it: ``job`` → ``job.claim``, ``job.run``.

A job runs long after the request that queued it ended, possibly on another instance, so
its spans are a trace of their own, begun when the claim that took it began: the root
``job`` span (the job's id), a ``job.claim`` child for the store's claim, and ``job.run``
for running it through the engine and recording the outcome, under which the engine's
spans (admission, provider attempts, verification, publishing) nest. A claim that finds
nothing makes no trace, so an idle shared queue's polling exports nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.response import ImageResponse
from imagebridge.engine import tracing

__all__ = ["JobTrace", "claim_clock", "describe_outcome"]

SHARED = "imagebridge.job.shared"
INSTANCE = "imagebridge.instance"


def claim_clock() -> int:
    """When a claim begins, in the clock spans use (``time.time_ns``)."""
    return time.time_ns()


class JobTrace:
    """The root span of one claimed job; :meth:`running` is the run under it."""

    __slots__ = ("_root",)

    def __init__(self, root: tracing.OpenSpan) -> None:
        self._root = root

    @classmethod
    def claimed(
        cls, job_id: str, claim_started_ns: int, *, instance: str, shared: bool
    ) -> JobTrace:
        """The trace of a job this instance just claimed, in a claim begun at
        ``claim_started_ns`` (:func:`claim_clock`)."""
        attributes: tracing.Attributes = {
            tracing.JOB_ID: job_id,
            INSTANCE: instance,
            SHARED: shared,
        }
        root = tracing.begin(tracing.JOB, attributes, start_ns=claim_started_ns)
        root.record_child(tracing.JOB_CLAIM, claim_started_ns, time.time_ns(), attributes)
        return cls(root)

    @contextlib.contextmanager
    def running(self) -> Iterator[tracing.Span]:
        """The ``job.run`` span, under the job's root, which ends with it."""
        with self._root.activate(), tracing.span(tracing.JOB_RUN) as span:
            yield span


def describe_outcome(span: tracing.Span, outcome: ImageResponse | BridgeError) -> None:
    """How the run ended: ``succeeded``, or failed with the error's code."""
    if isinstance(outcome, ImageResponse):
        span.set_attribute(tracing.OUTCOME, "succeeded")
        return
    span.set_attribute(tracing.OUTCOME, "failed")
    span.set_attribute(tracing.ERROR_CODE, outcome.code.value)
    span.fail(outcome.code.value)
