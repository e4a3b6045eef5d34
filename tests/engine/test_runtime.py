"""The runtime pipeline, and the behaviours the original's orchestrator.rs tests check
(one attempt on a route in test_attempt, fallback in test_fallback, route selection in
test_routing)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.admission import GateLimits
from imagebridge.engine.provider import ProviderContext
from imagebridge.engine.runtime import ExecutionContext
from tests.engine.runtime_requests import ONE, request
from tests.support.fakes import FakeProvider
from tests.support.images import png_bytes
from tests.support.runtime import make_runtime


def ctx(**fields: Any) -> ExecutionContext:
    return ExecutionContext(**fields)


# -- behaviour statements ----------------------------------------------------------------------


async def test_negotiates_then_independently_verifies_and_projects_metadata() -> None:
    provider = FakeProvider(caps=ONE)
    runtime = make_runtime(provider)
    response = await runtime.execute(
        request(
            parameters={"n": 2},
            policies={"compatibility": "normalize", "revised_prompt": "omit"},
            output={"response_format": "metadata"},
        ),
        ctx(request_id="request-1"),
    )
    assert response.id == "request-1"
    assert response.requested.n == 2 and response.effective.n == 1
    assert len(response.data) == 1 and response.data[0].type == "metadata"
    assert response.revised_prompt is None
    assert provider.calls == 1


@pytest.mark.parametrize("mode", ["strict", "normalize"])
async def test_mode_reports_verified_dimension_mismatch(mode: str) -> None:
    runtime = make_runtime(FakeProvider(caps=ONE))
    response = await runtime.execute(
        request(parameters={"size": "2x2"}, policies={"compatibility": mode})
    )
    assert response.effective.size == "1x1"
    assert [(n.field, n.requested, n.effective, n.reason) for n in response.normalizations] == [
        ("parameters.size", "2x2", "1x1", "provider_output_dimensions_differed")
    ]
    # the original's warning, kept for its clients, and the issue-32 one for the same fact
    assert response.warnings == [
        "provider_output_dimensions_differed",
        "provider_output_size_differed",
    ]


async def test_replays_idempotent_responses_without_a_second_provider_call() -> None:
    provider = FakeProvider(caps=ONE)
    runtime = make_runtime(provider)
    first = await runtime.execute(request(idempotency_key="k"), ctx(request_id="one"))
    second = await runtime.execute(request(idempotency_key="k"), ctx(request_id="two"))
    assert first.model_dump_json() == second.model_dump_json()
    assert second.id == "one"
    assert provider.calls == 1


class MemorySink:
    def __init__(self) -> None:
        self.published: list[tuple[str, bytes]] = []

    async def publish(self, publication: Any) -> Any:
        from imagebridge.engine.publishing import PublishedArtifact

        prefix = (publication.filename_prefix or "image").lower()
        name = f"{prefix}-{len(self.published)}.png"
        self.published.append((name, publication.data))
        return PublishedArtifact(id=f"id-{len(self.published)}", name=name)

    async def attach_metadata(self, artifact_id: str, name: str, record: dict[str, Any]) -> str:
        return f"metadata-{artifact_id}.json"


async def test_publishes_bridge_owned_artifacts_only_after_verification() -> None:
    from imagebridge.engine.materialize import Materializer

    sink = MemorySink()
    runtime = make_runtime(FakeProvider(caps=ONE), materializer=Materializer(artifacts=sink))
    response = await runtime.execute(
        request(output={"response_format": "artifact", "filename_prefix": "Result"})
    )
    item = response.data[0]
    assert item.type == "artifact" and item.name is not None and item.name.startswith("result-")
    assert sink.published[0][1] == png_bytes()


async def test_deadline_keeps_an_unknown_idempotency_tombstone() -> None:
    provider = FakeProvider(caps=ONE, delay=5.0)
    runtime = make_runtime(provider, cancellation_grace_ms=50)
    keyed = request(idempotency_key="slow", timeout_ms=100)
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(keyed)
    error = caught.value
    assert error.code is ErrorCode.TIMEOUT
    assert error.retryable is False and error.details["outcome"] == "unknown"
    assert provider.saw_cancellation
    with pytest.raises(BridgeError) as again:
        await runtime.execute(keyed)
    assert again.value.code is ErrorCode.TIMEOUT and again.value.details["outcome"] == "unknown"
    assert provider.calls == 1


async def test_rejects_provider_metadata_that_does_not_match_decoded_output() -> None:
    class Liar(FakeProvider):
        def response(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
            response = super().response(request, context)
            response.data[0].sha256 = "0" * 64
            return response

    runtime = make_runtime(Liar(caps=ONE))
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request())
    assert caught.value.code is ErrorCode.PROTOCOL
    assert len(caught.value.details["attempts"]) == 1


async def test_runtime_queue_rejects_work_beyond_its_explicit_bound() -> None:
    provider = FakeProvider(caps=ONE, delay=0.2)
    runtime = make_runtime(
        provider,
        global_gate=GateLimits(1, 1),
        provider_gates={"test-provider": GateLimits(1, 1)},
    )
    first = asyncio.ensure_future(runtime.execute(request()))
    second = asyncio.ensure_future(runtime.execute(request()))
    await asyncio.sleep(0.05)
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request())
    assert caught.value.code is ErrorCode.OVERLOADED
    assert caught.value.details["limit"] == "global"
    assert len((await first).data) == 1 and len((await second).data) == 1


async def test_concurrent_idempotent_callers_share_one_provider_operation() -> None:
    provider = FakeProvider(caps=ONE, delay=0.05)
    runtime = make_runtime(provider)
    results = await asyncio.gather(
        *(runtime.execute(request(idempotency_key="same")) for _ in range(5))
    )
    assert len({r.model_dump_json() for r in results}) == 1
    assert provider.calls == 1


async def test_shutdown_cancels_and_drains_active_work_before_provider_release() -> None:
    provider = FakeProvider(caps=ONE, delay=5.0)
    runtime = make_runtime(provider)
    active = asyncio.ensure_future(runtime.execute(request()))
    await asyncio.sleep(0.05)
    await runtime.shutdown()
    await runtime.shutdown()
    with pytest.raises(BridgeError) as caught:
        await active
    assert caught.value.code is ErrorCode.CANCELLED
    assert provider.saw_cancellation
    assert provider.shutdown_calls == 1
    with pytest.raises(BridgeError) as later:
        await runtime.execute(request())
    assert later.value.code is ErrorCode.CANCELLED


# -- more behaviour ----------------------------------------------------------------------------


async def test_validation_errors_carry_no_attempts() -> None:
    runtime = make_runtime(FakeProvider(caps=ONE))
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(prompt=" "))
    assert caught.value.message == "request validation failed"
    assert "attempts" not in caught.value.details


async def test_invalid_request_id_is_rejected() -> None:
    runtime = make_runtime(FakeProvider(caps=ONE))
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(), ctx(request_id="has space"))
    assert caught.value.message == "request ID is invalid"


async def test_external_cancellation_after_dispatch_is_an_unknown_outcome() -> None:
    from imagebridge.engine.cancellation import CancelToken

    provider = FakeProvider(caps=ONE, delay=5.0)
    runtime = make_runtime(provider, cancellation_grace_ms=100)
    token = CancelToken()
    task = asyncio.ensure_future(runtime.execute(request(), ctx(cancellation=token)))
    await asyncio.sleep(0.05)
    token.cancel()
    with pytest.raises(BridgeError) as caught:
        await task
    assert caught.value.code is ErrorCode.CANCELLED
    assert caught.value.details["outcome"] == "unknown"
    assert provider.saw_cancellation


async def test_success_within_the_grace_is_kept() -> None:
    async def finish_despite_cancel(req: ImageRequest, context: ProviderContext) -> None:
        await context.cancellation.wait()
        await asyncio.sleep(0.01)

    provider = FakeProvider(caps=ONE, behaviour=finish_despite_cancel)
    runtime = make_runtime(provider, cancellation_grace_ms=500)
    response_task = asyncio.ensure_future(runtime.execute(request(timeout_ms=50)))
    response = await response_task
    assert len(response.data) == 1


async def test_timings_and_response_identity() -> None:
    provider = FakeProvider(caps=ONE)
    runtime = make_runtime(provider)
    response = await runtime.execute(request(), ctx(request_id="caller-request-7"))
    assert response.id == "caller-request-7"
    timings = response.timings.model_dump()
    assert set(timings) == {"queue_ms", "input_ms", "provider_ms", "artifact_ms", "total_ms"}
    assert response.timings.total_ms >= response.timings.provider_ms
    assert response.requested.model_dump() == request().parameters.model_dump()
    wire = response.to_wire()
    for absent in ("normalizations", "failures", "attempts", "warnings"):
        assert absent not in wire


async def test_a_wrong_format_from_the_provider_is_reencoded_not_refused() -> None:
    """Issue 32 (the original answered 502 protocol after the billed call)."""
    provider = FakeProvider(caps={**ONE, "output_formats": ["png", "jpeg"]})
    runtime = make_runtime(provider)
    response = await runtime.execute(request(parameters={"output_format": "jpeg"}))
    assert response.data[0].format.value == "jpeg"
    assert "provider_output_format_differed" in response.warnings
    assert provider.calls == 1


async def test_a_provider_deaf_to_cancellation_is_abandoned_after_the_grace() -> None:
    abandoned: list[bool] = []

    async def deaf(req: ImageRequest, context: ProviderContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            abandoned.append(True)
            raise

    runtime = make_runtime(FakeProvider(caps=ONE, behaviour=deaf), cancellation_grace_ms=50)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(timeout_ms=50))
    assert loop.time() - started < 5
    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.retryable is False and caught.value.details["outcome"] == "unknown"
    assert abandoned == [True]


async def test_queue_snapshot_counts_waiters_per_gate() -> None:
    provider = FakeProvider(caps=ONE, delay=0.2)
    runtime = make_runtime(provider, provider_gates={"test-provider": GateLimits(1, 2)})
    assert runtime.queue_snapshot() == {
        "global_queued": 0,
        "providers_queued": {"test-provider": 0},
    }
    tasks = [asyncio.ensure_future(runtime.execute(request())) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert runtime.queue_snapshot()["providers_queued"] == {"test-provider": 2}
    assert [len(response.data) for response in await asyncio.gather(*tasks)] == [1, 1, 1]
    assert runtime.queue_snapshot()["providers_queued"] == {"test-provider": 0}
