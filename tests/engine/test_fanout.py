"""Fan-out decorator: the original's six fan-out tests and the issue's n = 40 scenarios."""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.events import PartialImageEvent, ProgressEvent, StartedEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import (
    BridgeErrorBody,
    ImageFailure,
    ImageResponse,
    Normalization,
    SessionMetadata,
    Usage,
)
from imagebridge.engine import fanout as fanout_module
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.fanout import FanoutProvider, chunk_plan, subrequest_id
from imagebridge.engine.negotiation import negotiate_request
from imagebridge.engine.provider import ProviderContext, ProviderEventT
from imagebridge.engine.validation import RequestLimits
from tests.support.fakes import FakeProvider

ONE = {
    "count": {"min": 1, "max": 1},
    "batching": {"mode": "native", "native_count": {"min": 1, "max": 1}, "max_parallel_outputs": 1},
    "partial_images": {"min": 0, "max": 3},
    "persistent_sessions": True,
}


def offset_of(context: ProviderContext) -> int:
    match = re.search(r":output:(\d+)$", context.request_id)
    return int(match.group(1)) if match else 0


class SeedFake(FakeProvider):
    """20 ms per call, native 1; fails the listed offsets; reports usage and events."""

    def __init__(self, failing: set[int] | None = None, delay: float = 0.02) -> None:
        super().__init__(caps=ONE)
        self.failing = failing or set()
        self.step = delay

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            offset = offset_of(context)
            await context.emit(PartialImageEvent(index=0, partial_index=0, b64_json="cA=="))
            await context.emit(PartialImageEvent(index=5, partial_index=0, b64_json="cA=="))
            try:
                await asyncio.wait_for(context.cancellation.wait(), self.step)
            except TimeoutError:
                pass
            else:
                self.saw_cancellation = True
                raise BridgeError(ErrorCode.CANCELLED, "cancelled")
            if offset in self.failing:
                raise BridgeError(ErrorCode.UPSTREAM, "chunk failed", retryable=True)
            response = self.response(request, context)
            response.usage = Usage(total_tokens=1)
            if request.session.key is not None:
                response.session = SessionMetadata(
                    key=request.session.key, thread_id="t1", reused=True
                )
            return response
        finally:
            self.in_flight -= 1


def decorate(inner: FakeProvider, max_outputs: int = 4, parallel: int = 2) -> FanoutProvider:
    return FanoutProvider(
        inner, max_outputs=max_outputs, max_parallel_outputs=parallel, limits=RequestLimits()
    )


def request(n: int, **fields: Any) -> ImageRequest:
    body: dict[str, Any] = {"operation": "generate", "prompt": "fan", "parameters": {"n": n}}
    for key, value in fields.items():
        if key in ("failure_policy", "partial_images", "quality"):
            body["parameters"][key] = value
        else:
            body[key] = value
    return ImageRequest.model_validate(body)


def context(events: list[ProviderEventT] | None = None, request_id: str = "req") -> ProviderContext:
    async def sink(event: ProviderEventT) -> None:
        assert events is not None
        events.append(event)

    return ProviderContext(
        request_id=request_id,
        deadline=Deadline.after(30),
        cancellation=CancelToken(),
        events=sink if events is not None else None,
    )


async def test_advertises_effective_and_native_batch_limits() -> None:
    caps = await decorate(SeedFake()).capabilities(None)
    assert (caps.count.min, caps.count.max) == (1, 4)
    assert caps.batching.mode.value == "fan_out"
    assert (caps.batching.native_count.min, caps.batching.native_count.max) == (1, 1)
    assert caps.batching.max_parallel_outputs == 2


async def test_best_effort_preserves_indices_and_maps_partial_events() -> None:
    inner = SeedFake(failing={1})
    events: list[ProviderEventT] = []
    response = await decorate(inner).execute(
        request(4, failure_policy="best_effort"), context(events)
    )
    assert [image.index for image in response.data] == [0, 2, 3]
    assert [failure.index for failure in response.failures] == [1]
    assert response.failures[0].error.details["output_index"] == 1
    assert response.usage is not None and response.usage.total_tokens == 3
    assert "emulated_multi_image_fanout" in response.warnings
    assert "partial_output_failure" in response.warnings
    assert inner.peak == 2
    partial_indices = sorted(e.index for e in events if isinstance(e, PartialImageEvent))
    assert partial_indices == [0, 1, 2, 3]  # out-of-range partials (index 5) are dropped
    assert all(image.generation_ms is not None for image in response.data)


async def test_fail_fast_stops_unscheduled_outputs_and_marks_ambiguous_batch() -> None:
    inner = SeedFake(failing={0})
    with pytest.raises(BridgeError) as caught:
        await decorate(inner).execute(request(4), context())
    error = caught.value
    assert inner.calls <= 2
    assert error.retryable is False
    assert error.details["outcome"] == "unknown"
    assert error.details["retry_scope"] == "do_not_retry_full_batch"
    assert error.details["output_index"] == 0
    assert isinstance(error.details["generation_ms"], int)


async def test_persistent_sessions_are_serialized_within_a_batch() -> None:
    inner = SeedFake()
    response = await decorate(inner).execute(
        request(3, session={"mode": "persistent", "key": "campaign"}), context()
    )
    assert len(response.data) == 3
    assert inner.peak == 1
    assert response.session is not None and response.session.key == "campaign"
    assert "sequential_multi_image_fanout" not in response.warnings


async def test_isolated_batches_can_explicitly_run_sequentially() -> None:
    inner = SeedFake()
    response = await decorate(inner).execute(
        request(3, policies={"batch_execution": "sequential"}), context()
    )
    assert len(response.data) == 3
    assert inner.peak == 1
    assert "sequential_multi_image_fanout" in response.warnings


async def test_provider_wide_parallelism_is_shared_across_batches() -> None:
    inner = SeedFake()
    provider = decorate(inner)
    first, second = await asyncio.gather(
        provider.execute(request(4), context(request_id="a")),
        provider.execute(request(4), context(request_id="b")),
    )
    assert len(first.data) == len(second.data) == 4
    assert inner.peak == 2


# -- the scenarios --------------------------------------------------------------------


async def test_forty_outputs_in_request_order() -> None:
    inner = SeedFake(delay=0.0)
    response = await decorate(inner, max_outputs=255, parallel=255).execute(request(40), context())
    assert [image.index for image in response.data] == list(range(40))
    assert inner.calls == 40


async def test_forty_outputs_best_effort_with_one_failure() -> None:
    inner = SeedFake(failing={17}, delay=0.0)
    response = await decorate(inner, max_outputs=255, parallel=255).execute(
        request(40, failure_policy="best_effort"), context()
    )
    assert len(response.data) == 39
    assert [f.index for f in response.failures] == [17]


async def test_all_outputs_failing_is_an_error_with_counts() -> None:
    inner = SeedFake(failing={0, 1, 2})
    with pytest.raises(BridgeError) as caught:
        await decorate(inner).execute(request(3, failure_policy="best_effort"), context())
    assert caught.value.details["all_outputs_failed"] is True
    assert caught.value.details["failed_outputs"] == 3
    assert caught.value.details["output_index"] == 0


async def test_single_sequential_failure_keeps_its_own_retryability() -> None:
    inner = SeedFake(failing={0})
    with pytest.raises(BridgeError) as caught:
        await decorate(inner).execute(
            request(3, policies={"batch_execution": "sequential"}), context()
        )
    assert caught.value.retryable is True
    assert "outcome" not in caught.value.details
    assert inner.calls == 1


async def test_invalid_chunk_output_set_is_a_protocol_error() -> None:
    class Broken(SeedFake):
        async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
            response = await super().execute(request, context)
            response.data[0].index = 3
            return response

    with pytest.raises(BridgeError) as caught:
        await decorate(Broken()).execute(request(2), context())
    assert caught.value.code is ErrorCode.PROTOCOL
    assert "invalid output set" in caught.value.message


async def test_direct_path_when_native_count_suffices() -> None:
    seen: list[str] = []

    class Direct(SeedFake):
        async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
            seen.append(context.request_id)
            await context.emit(StartedEvent())  # the fan-out path would drop this
            return await super().execute(request, context)

    events: list[ProviderEventT] = []
    inner = Direct()
    response = await decorate(inner).execute(
        request(1, quality="high", partial_images=0, policies={"compatibility": "normalize"}),
        context(events, request_id="caller-id"),
    )
    assert seen == ["caller-id"]  # the original context: no sub-request id
    assert inner.calls == 1
    assert isinstance(events[0], StartedEvent)
    # events pass straight through, unfiltered (the fan-out path drops index 5)
    assert [e.index for e in events if isinstance(e, PartialImageEvent)] == [0, 5]
    assert "emulated_multi_image_fanout" not in response.warnings
    # negotiation ran against the decorated capabilities and its normalizations lead
    assert response.requested.quality.value == "high"
    assert response.effective.quality.value == "auto"
    assert response.normalizations[0].field == "parameters.quality"


async def test_caller_cancellation_reaches_every_chunk() -> None:
    inner = SeedFake(delay=5.0)
    ctx = context()
    task = asyncio.ensure_future(decorate(inner).execute(request(4), ctx))
    await asyncio.sleep(0.05)
    ctx.cancellation.cancel()
    with pytest.raises(BridgeError):
        await task
    assert inner.saw_cancellation


def test_chunk_plan_and_subrequest_ids() -> None:
    assert chunk_plan(5, 2) == [(0, 2), (2, 2), (4, 1)]
    assert chunk_plan(255, 1)[-1] == (254, 1)
    assert subrequest_id("req", 3) == "req:output:3"
    fits = "x" * (128 - len(":output:7"))  # exactly 128 bytes with the suffix
    assert subrequest_id(fits, 7) == fits + ":output:7"
    long_id = fits + "x"
    derived = subrequest_id(long_id, 7)
    digest = hashlib.sha256(long_id.encode()).hexdigest()[:32]
    assert derived == f"fanout:{digest}:7"
    # the limit counts bytes, not characters
    wide = "é" * 60  # 120 bytes
    assert subrequest_id(wide, 0).startswith("fanout:")


async def test_chunk_results_are_merged_field_by_field() -> None:
    """Usage sums, first revised prompt, chunk warnings kept, chunk normalizations kept once
    (the original discarded them; a provider's "not what you asked" must not vanish)."""

    class Merging(SeedFake):
        async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
            offset = offset_of(context)
            await context.emit(ProgressEvent(stage=f"chunk-{offset}"))
            response = self.response(request, context)
            response.revised_prompt = None if offset == 0 else f"revised {offset}"
            response.usage = Usage(
                input_tokens=2 if offset != 1 else None,
                total_tokens=5,
                provider={"images": 1, f"chunk{offset}": 1},
            )
            response.warnings = [f"chunk_warning_{offset % 2}"]
            response.normalizations = [
                Normalization(field="parameters.size", reason="chunk-level", effective="1x1")
            ]
            response.session = SessionMetadata(key="k", thread_id=f"t{offset}", reused=True)
            return response

    events: list[ProviderEventT] = []
    response = await decorate(Merging()).execute(request(3), context(events, request_id="p"))
    assert response.id == "p"
    assert response.revised_prompt == "revised 1"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (4, None)
    assert response.usage.total_tokens == 15
    assert response.usage.provider == {"images": 3, "chunk0": 1, "chunk1": 1, "chunk2": 1}
    assert response.warnings == [
        "chunk_warning_0",
        "chunk_warning_1",
        "emulated_multi_image_fanout",
    ]
    assert response.normalizations == [
        Normalization(field="parameters.size", reason="chunk-level", effective="1x1")
    ]
    assert response.session is None  # the chunks disagree on the thread
    assert sorted(e.stage for e in events if isinstance(e, ProgressEvent)) == [
        "chunk-0",
        "chunk-1",
        "chunk-2",
    ]
    assert response.timings.provider_ms == response.timings.total_ms


async def test_best_effort_chunk_failures_are_reindexed() -> None:
    """A native batch of 2 reporting its own failure keeps it, at the absolute index."""

    class Pairs(SeedFake):
        async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
            response = self.response(request, context)
            if offset_of(context) == 2:
                error = BridgeError(ErrorCode.UPSTREAM, "second of the pair failed")
                response.data = response.data[:1]
                response.failures = [
                    ImageFailure(index=1, error=BridgeErrorBody.from_error(error), generation_ms=0)
                ]
            return response

    inner = Pairs(delay=0.0)
    inner._caps.update(
        count={"min": 1, "max": 2},
        batching={
            "mode": "native",
            "native_count": {"min": 1, "max": 2},
            "max_parallel_outputs": 2,
        },
    )
    response = await decorate(inner).execute(request(4, failure_policy="best_effort"), context())
    assert [image.index for image in response.data] == [0, 1, 2]
    assert [failure.index for failure in response.failures] == [3]
    assert "partial_output_failure" in response.warnings


async def test_failures_smuggled_under_fail_fast_are_a_protocol_error() -> None:
    class Smuggler(SeedFake):
        async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
            response = self.response(request, context)
            if offset_of(context) == 1:
                error = BridgeError(ErrorCode.UPSTREAM, "hidden")
                response.data = []
                response.failures = [
                    ImageFailure(index=0, error=BridgeErrorBody.from_error(error), generation_ms=0)
                ]
            return response

    with pytest.raises(BridgeError) as caught:
        await decorate(Smuggler(delay=0.0)).execute(request(2), context())
    assert caught.value.code is ErrorCode.PROTOCOL
    assert "partial failures under fail-fast" in caught.value.message


async def test_provider_identity_must_not_change_within_a_batch() -> None:
    class Shifty(SeedFake):
        async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
            response = self.response(request, context)
            if offset_of(context) == 1:
                response.model = "another-model"
            return response

    with pytest.raises(BridgeError) as caught:
        await decorate(Shifty(delay=0.0)).execute(request(2), context())
    assert caught.value.code is ErrorCode.PROTOCOL
    assert "identity changed" in caught.value.message


async def test_fail_fast_gives_in_flight_siblings_a_bounded_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sibling that ignores cancellation is stopped once the grace ends."""
    monkeypatch.setattr(fanout_module, "FAILED_SIBLING_GRACE", 0.05)
    stopped: list[int] = []

    class Stubborn(SeedFake):
        async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
            if offset_of(context) == 0:
                raise BridgeError(ErrorCode.UPSTREAM, "first failed", retryable=True)
            try:
                await asyncio.sleep(30)  # deaf to the batch's cancellation token
            except asyncio.CancelledError:
                stopped.append(offset_of(context))
                raise
            return self.response(request, context)

    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(BridgeError) as caught:
        await decorate(Stubborn()).execute(request(2), context())
    assert loop.time() - started < 5
    assert stopped == [1]
    assert caught.value.details["outcome"] == "unknown"


async def test_waiting_for_a_provider_wide_permit_respects_deadline_and_cancel() -> None:
    inner = SeedFake(delay=5.0)
    provider = decorate(inner, max_outputs=4, parallel=1)
    holder_ctx = context(request_id="holder")
    holder = asyncio.ensure_future(provider.execute(request(1), holder_ctx))
    await asyncio.sleep(0.01)
    assert inner.in_flight == 1
    short = ProviderContext(
        request_id="late", deadline=Deadline.after(0.05), cancellation=CancelToken()
    )
    with pytest.raises(BridgeError) as timed_out:
        await provider.execute(request(1), short)
    assert timed_out.value.code is ErrorCode.TIMEOUT and timed_out.value.retryable
    assert "waiting for capacity" in timed_out.value.message
    cancelled_ctx = context(request_id="cancelled")
    waiter = asyncio.ensure_future(provider.execute(request(1), cancelled_ctx))
    await asyncio.sleep(0.01)
    cancelled_ctx.cancellation.cancel()
    with pytest.raises(BridgeError) as cancelled:
        await waiter
    assert cancelled.value.code is ErrorCode.CANCELLED
    assert inner.calls == 1  # neither waiter reached the provider
    holder_ctx.cancellation.cancel()
    with pytest.raises(BridgeError):
        await holder


def test_invalid_limits_are_configuration_errors() -> None:
    with pytest.raises(BridgeError) as caught:
        FanoutProvider(SeedFake(), max_outputs=2, max_parallel_outputs=3, limits=RequestLimits())
    assert caught.value.code is ErrorCode.CONFIGURATION


# -- execute_negotiated: the runtime's path, which skips the decorator's second negotiation --


def _comparable(response: ImageResponse) -> dict[str, Any]:
    """The response minus what depends on the clock."""
    body = response.model_dump(mode="json", exclude={"created", "timings"})
    for image in body["data"]:
        image.pop("generation_ms", None)
    return body


@pytest.mark.parametrize("n", [1, 3])
async def test_execute_negotiated_with_equal_capabilities_matches_execute(n: int) -> None:
    original = request(n, quality="high", partial_images=5, policies={"compatibility": "normalize"})
    responses: list[ImageResponse] = []
    sent: list[list[ImageRequest]] = []
    for negotiated_path in (False, True):
        inner = FakeProvider(caps=ONE)
        provider = decorate(inner)
        caps = await provider.capabilities(None)  # what the runtime discovers
        effective = negotiate_request(original, caps).request
        assert effective.parameters.quality.value == "auto"  # negotiation did change it
        if negotiated_path:
            response = await provider.execute_negotiated(effective, context(), caps)
        else:
            response = await provider.execute(effective, context())
        responses.append(response)
        sent.append(inner.requests)
    assert _comparable(responses[1]) == _comparable(responses[0])
    assert len(sent[0]) == n and sent[1] == sent[0]
    assert responses[1].normalizations == []  # the runtime adds its own; none here twice


async def test_execute_negotiated_negotiates_afresh_when_the_inner_document_changed() -> None:
    inner = FakeProvider(caps=ONE)
    inner._caps["qualities"] = ["auto", "high"]
    provider = decorate(inner)
    caps = await provider.capabilities(None)
    effective = negotiate_request(
        request(3, quality="high", policies={"compatibility": "normalize"}), caps
    ).request
    assert effective.parameters.quality.value == "high"
    inner._caps["qualities"] = ["auto"]  # the provider's document changes before the call
    response = await provider.execute_negotiated(effective, context(), caps)
    assert {sent.parameters.quality.value for sent in inner.requests} == {"auto"}
    assert [(n.field, n.requested, n.effective) for n in response.normalizations] == [
        ("parameters.quality", "high", "auto")
    ]
    assert response.requested.quality.value == "high"
    assert response.effective.quality.value == "auto"
    assert len(response.data) == 3


async def test_execute_negotiated_refuses_what_a_changed_strict_document_no_offers() -> None:
    inner = FakeProvider(caps=ONE)
    inner._caps["qualities"] = ["auto", "high"]
    provider = decorate(inner)
    caps = await provider.capabilities(None)
    effective = negotiate_request(request(2, quality="high"), caps).request
    inner._caps["qualities"] = ["auto"]
    with pytest.raises(BridgeError) as caught:
        await provider.execute_negotiated(effective, context(), caps)
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert caught.value.field == "parameters.quality"
    assert inner.calls == 0
