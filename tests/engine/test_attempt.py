"""One attempt on a route: the provider's gate, capabilities and negotiation, the call, the
response checked and stamped; the negotiated request validated once, on whichever path runs it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.admission import GateLimits
from imagebridge.engine.decorator import ProviderDecorator
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.engine.provider import ProviderContext
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.engine.validation import RequestLimits
from tests.engine.runtime_requests import ONE, request
from tests.support.fakes import FakeProvider
from tests.support.runtime import make_runtime

# -- the provider's gate and stages ------------------------------------------------------------


async def test_a_timeout_while_queued_is_retryable_and_never_dispatched() -> None:
    provider = FakeProvider(caps=ONE, delay=0.3)
    runtime = make_runtime(provider, provider_gates={"test-provider": GateLimits(1, 4)})
    holder = asyncio.ensure_future(runtime.execute(request()))
    await asyncio.sleep(0.02)
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(timeout_ms=50))
    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.retryable is True
    assert "outcome" not in caught.value.details
    assert len((await holder).data) == 1
    assert provider.calls == 1


async def test_strict_unsupported_quality_has_one_attempt() -> None:
    runtime = make_runtime(FakeProvider(caps=ONE))
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(parameters={"quality": "high"}))
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert caught.value.field == "parameters.quality"
    assert len(caught.value.details["attempts"]) == 1


async def test_a_response_from_another_model_is_a_protocol_error() -> None:
    class Drifting(FakeProvider):
        def response(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
            drifted = super().response(request, context)
            drifted.model = "some-other-model"
            return drifted

    runtime = make_runtime(Drifting(caps=ONE))
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request())
    assert caught.value.code is ErrorCode.PROTOCOL
    assert caught.value.details["expected_model"] == "test-image"
    assert caught.value.details["actual_model"] == "some-other-model"


async def test_events_reach_the_sink_and_completed_precedes_materialization() -> None:
    from imagebridge.contract.events import CompletedEvent, PartialImageEvent

    seen: list[str] = []

    async def sink(event: Any) -> None:
        seen.append(event.type)

    runtime = make_runtime(
        FakeProvider(caps={**ONE, "partial_images": {"min": 0, "max": 2}}, partials=1)
    )
    response = await runtime.execute(
        request(parameters={"partial_images": 1}), ExecutionContext(events=sink)
    )
    assert seen == [
        PartialImageEvent.model_fields["type"].default,
        CompletedEvent.model_fields["type"].default,
    ]
    assert len(response.data) == 1


# -- the negotiated request is validated once, on whichever path runs it -----------------------


TIGHT = RequestLimits(max_prompt_bytes=64)


NEAR_LIMIT = "p" * 60  # within the limit alone; over it once the negative prompt is merged


def _prompt_issues(error: BridgeError) -> list[tuple[str, str]]:
    return [(issue["field"], issue["code"]) for issue in error.details["issues"]]


async def test_an_undecorated_provider_never_gets_a_merged_prompt_over_the_limit() -> None:
    provider = FakeProvider(caps=ONE)  # native count == max outputs: no fan-out decorator
    runtime = make_runtime(provider, request_limits=TIGHT)
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(prompt=NEAR_LIMIT, negative_prompt="blurry hands"))
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert _prompt_issues(caught.value) == [("prompt", "too_large")]
    assert provider.calls == 0
    # a merge that stays within the limit reaches the provider, merged
    await runtime.execute(request(prompt="p" * 8, negative_prompt="dim"))
    assert provider.calls == 1 and provider.requests[0].negative_prompt is None
    assert provider.requests[0].prompt.endswith("dim")


async def test_a_decorated_provider_validates_the_merged_prompt_itself() -> None:
    inner = FakeProvider(caps=ONE)
    decorated = FanoutProvider(inner, max_outputs=4, max_parallel_outputs=2, limits=TIGHT)
    runtime = make_runtime(decorated, request_limits=TIGHT)
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(
            request(prompt=NEAR_LIMIT, negative_prompt="blurry hands", parameters={"n": 2})
        )
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert _prompt_issues(caught.value) == [("prompt", "too_large")]
    assert inner.calls == 0


async def test_a_merged_prompt_is_held_to_the_runtimes_limits_on_the_fan_out_path_too() -> None:
    """The runtime checks a merged request itself, whatever the decorator's own limits."""
    inner = FakeProvider(caps=ONE)
    roomy = RequestLimits(max_prompt_bytes=4096)
    decorated = FanoutProvider(inner, max_outputs=4, max_parallel_outputs=2, limits=roomy)
    runtime = make_runtime(decorated, request_limits=TIGHT)
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(
            request(prompt=NEAR_LIMIT, negative_prompt="blurry hands", parameters={"n": 2})
        )
    assert _prompt_issues(caught.value) == [("prompt", "too_large")]
    assert inner.calls == 0
    # without a merge nothing grows, and the decorator's check is the only one after negotiation
    response = await runtime.execute(request(prompt=NEAR_LIMIT, parameters={"n": 2}))
    assert len(response.data) == 2 and inner.calls == 2


async def test_a_refusal_caused_by_the_merge_says_so() -> None:
    provider = FakeProvider(caps=ONE)
    runtime = make_runtime(provider, request_limits=TIGHT)
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(prompt=NEAR_LIMIT, negative_prompt="blurry hands"))
    error = caught.value
    assert error.details["negative_prompt_merged"] is True
    [issue] = error.details["issues"]
    assert issue["message"] == "prompt exceeds 64 bytes once the negative prompt was merged into it"
    assert any("negative prompt" in suggestion for suggestion in error.suggestions)
    assert "blurry" not in str(error.to_dict())  # the prompt's text is never echoed
    # a prompt that is too long on its own is refused before negotiation, without the note
    with pytest.raises(BridgeError) as alone:
        await runtime.execute(request(prompt="p" * 65, negative_prompt="dim"))
    assert "negative_prompt_merged" not in alone.value.details
    assert alone.value.details["issues"][0]["message"] == "prompt exceeds 64 bytes"


async def test_a_decorator_other_than_the_fan_out_sees_every_call_through_its_execute() -> None:
    """The runtime calls every provider through ``execute_negotiated``; a decorator that adds
    something to ``execute`` (a call log) is not bypassed by it, nor trusted to validate."""

    class Counting(ProviderDecorator):
        executed = 0

        async def execute(self, req: ImageRequest, context: ProviderContext) -> ImageResponse:
            self.executed += 1
            return await self.inner.execute(req, context)

    inner = FakeProvider(caps=ONE)
    decorated = Counting(inner)
    assert not decorated.validates_requests
    runtime = make_runtime(decorated, request_limits=TIGHT)
    await runtime.execute(request(prompt="p" * 8, negative_prompt="dim"))
    assert (decorated.executed, inner.calls) == (1, 1)
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(prompt=NEAR_LIMIT, negative_prompt="blurry hands"))
    assert _prompt_issues(caught.value) == [("prompt", "too_large")]
    assert (decorated.executed, inner.calls) == (1, 1)
