"""The engine's tracing port: a no-op until a tracer is installed, then the engine's spans
through any tracer (here a recording one, no OpenTelemetry), with what an attempt says."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.engine import tracing
from imagebridge.engine.admission import AdmissionGate
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.engine.spans import billing
from tests.support.fakes import FakeProvider
from tests.support.runtime import make_runtime


@dataclass
class Recorded:
    name: str
    parent: Recorded | None
    attributes: dict[str, Any] = field(default_factory=dict)
    error_type: str | None = None

    def set_attribute(self, key: str, value: tracing.AttributeValue) -> None:
        self.attributes[key] = value

    def fail(self, error_type: str) -> None:
        self.error_type = error_type


class RecordingTracer:
    """A tracer of the port alone: spans in a list, the current one in a context variable."""

    def __init__(self) -> None:
        self.spans: list[Recorded] = []
        self._current: contextvars.ContextVar[Recorded | None] = contextvars.ContextVar(
            "recorded", default=None
        )

    @contextlib.contextmanager
    def span(self, name: str, attributes: tracing.Attributes | None = None) -> Iterator[Recorded]:
        recorded = Recorded(name, self._current.get(), dict(attributes or {}))
        self.spans.append(recorded)
        token = self._current.set(recorded)
        try:
            yield recorded
        except BaseException as exc:
            if recorded.error_type is None:
                recorded.fail(type(exc).__name__)
            raise
        finally:
            self._current.reset(token)

    def begin(self, name: str, attributes: Any = None, *, start_ns: int | None = None) -> Any:
        raise NotImplementedError

    def current_ids(self) -> tuple[str, str] | None:
        return None

    def named(self, name: str) -> list[Recorded]:
        return [span for span in self.spans if span.name == name]


@pytest.fixture
def recorder() -> Iterator[RecordingTracer]:
    tracer = RecordingTracer()
    remove = tracing.install(tracer)
    try:
        yield tracer
    finally:
        remove()


def test_without_a_tracer_every_span_is_one_shared_no_op() -> None:
    first = tracing.span(tracing.ATTEMPT, {tracing.PROVIDER: "mock"})
    with first as span:
        span.set_attribute(tracing.OUTCOME, "succeeded")
        span.fail("upstream")
    assert tracing.span(tracing.VERIFICATION) is first
    assert tracing.begin(tracing.JOB) is first
    assert tracing.current_ids() is None


def test_tracers_removed_in_any_order_leave_the_latest_still_installed() -> None:
    first, second = RecordingTracer(), RecordingTracer()
    remove_first = tracing.install(first)
    remove_second = tracing.install(second)
    assert tracing.installed() is second
    remove_first()  # the app that started first stops first
    assert tracing.installed() is second
    remove_second()
    assert isinstance(tracing.installed(), tracing.NoopTracer)


def test_billing_says_whether_the_upstream_call_ran() -> None:
    assert billing(None) == "billed"
    assert billing(BridgeError(ErrorCode.RATE_LIMITED, "later")) == "not_billed"
    unknown = BridgeError(ErrorCode.TIMEOUT, "lost").mark_unknown_outcome()
    assert billing(unknown) == "unknown"
    billed = BridgeError(ErrorCode.PROTOCOL, "bad answer", details={"billed": True})
    assert billing(billed) == "billed"


async def test_a_fallback_through_any_tracer(recorder: RecordingTracer) -> None:
    primary = FakeProvider("primary", fail=BridgeError(ErrorCode.OVERLOADED, "busy"))
    backup = FakeProvider("backup")
    runtime = make_runtime(primary, backup)
    request = ImageRequest.model_validate(
        {
            "operation": "generate",
            "prompt": "a fox",
            "routing": {"provider": "primary", "fallbacks": [{"provider": "backup"}]},
        }
    )
    response = await runtime.execute(request, ExecutionContext(request_id="r-1"))
    assert response.provider == "backup"
    first, second = recorder.named(tracing.ATTEMPT)
    assert first.attributes == {
        tracing.PROVIDER: "primary",
        tracing.OUTCOME: "failed",
        tracing.ERROR_CODE: "overloaded",
        tracing.BILLING: "not_billed",
    }
    assert first.error_type == "overloaded"
    assert second.attributes[tracing.OUTCOME] == "succeeded"
    assert second.attributes[tracing.MODEL] == "test-image"
    assert second.error_type is None
    assert recorder.named(tracing.ADMISSION) == []  # every gate admitted at once
    (verification,) = recorder.named(tracing.VERIFICATION)
    assert verification.parent is second and verification.attributes == {tracing.IMAGES: 1}


async def test_only_a_caller_that_waits_in_line_has_an_admission_span(
    recorder: RecordingTracer,
) -> None:
    gate = AdmissionGate("provider:mock", max_concurrent=1, max_queued=0)
    first = await gate.acquire(Deadline.after(5), CancelToken())
    assert recorder.named(tracing.ADMISSION) == []
    with pytest.raises(BridgeError) as refused:  # the line is full: refused, and shown
        await gate.acquire(Deadline.after(5), CancelToken())
    assert refused.value.code is ErrorCode.OVERLOADED
    (admission,) = recorder.named(tracing.ADMISSION)
    assert admission.attributes == {tracing.GATE: "provider:mock"}
    assert admission.error_type == "BridgeError"
    first.release()
