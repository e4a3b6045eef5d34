"""The input stage: every input is loaded once per logical request, through the input port."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.artifacts.inputs.remote import RemoteFetchPolicy, RemoteImageFetcher
from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.events import ProgressEvent, StartedEvent
from imagebridge.contract.request import ImageInput, ImageRequest
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.engine.inputs import LoadedImage, LoadedInputs, load_request_inputs
from imagebridge.engine.provider import ProviderContext, ProviderEventT
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.engine.validation import RequestLimits
from imagebridge.providers.mock import MockProvider, MockSettings
from tests.artifacts.http_server import Route, local_server
from tests.artifacts.images import jpeg, png
from tests.support.fakes import FakeProvider
from tests.support.network_guard import no_external_network  # noqa: F401 - fixture
from tests.support.runtime import make_runtime

RED, BLUE, MASK = png(4, 4, (255, 0, 0, 255)), png(5, 5, (0, 0, 255, 255)), png(4, 4)


def inline(data: bytes) -> dict[str, str]:
    return {"type": "base64", "data": base64.b64encode(data).decode()}


def edit(**fields: Any) -> ImageRequest:
    body: dict[str, Any] = {
        "operation": "edit",
        "prompt": "warmer",
        "images": [inline(RED)],
        "parameters": {"size": "8x8"},
    }
    body.update(fields)
    return ImageRequest.model_validate(body)


class CountingLoader:
    """The real inline loader, counting every input it is asked for."""

    def __init__(self, delay: float = 0.0) -> None:
        self.inner = InputLoader([])
        self.delay = delay
        self.loaded: list[str] = []

    async def aload_input(self, value: ImageInput, /) -> LoadedImage:
        self.loaded.append(value.type)
        if self.delay:
            await asyncio.sleep(self.delay)
        return await self.inner.aload_input(value)


def fanned_mock(name: str = "mock", **settings: Any) -> tuple[FanoutProvider, MockProvider]:
    inner = MockProvider(MockSettings(name=name, **settings))
    return FanoutProvider(
        inner, max_outputs=8, max_parallel_outputs=8, limits=RequestLimits()
    ), inner


# -- the port's values ------------------------------------------------------------------------


async def test_inputs_are_loaded_by_slot_in_request_order() -> None:
    request = edit(
        images=[inline(RED), inline(BLUE)], mask=inline(MASK), reference_images=[inline(BLUE)]
    )
    loaded = await load_request_inputs(request, InputLoader([]))

    assert [image.data for image in loaded.images] == [RED, BLUE]
    assert loaded.mask is not None and loaded.mask.data == MASK
    assert [image.data for image in loaded.reference_images] == [BLUE]
    assert [name for name, _ in loaded.named()] == [
        "images[0]",
        "images[1]",
        "mask",
        "reference_images[0]",
    ]
    shown = repr(loaded)
    assert "images=2" in shown and f"bytes={len(RED) + 2 * len(BLUE) + len(MASK)}" in shown
    assert "\\x89PNG" not in shown and "b'" not in shown
    assert loaded.require_for(request, "mock") is loaded


async def test_a_failing_input_is_named_and_nothing_after_it_is_loaded() -> None:
    loader = CountingLoader()
    bad = {"type": "base64", "data": base64.b64encode(b"not an image").decode()}
    request = edit(reference_images=[inline(BLUE), bad, inline(BLUE)])

    with pytest.raises(BridgeError) as caught:
        await load_request_inputs(request, loader)

    assert caught.value.code is ErrorCode.INPUT
    assert caught.value.details["field"] == "reference_images[1]"
    assert len(loader.loaded) == 3  # images[0], reference_images[0], reference_images[1]


def test_inputs_that_do_not_match_the_request_are_a_wiring_fault() -> None:
    with pytest.raises(BridgeError) as caught:
        LoadedInputs().require_for(edit(), "mock")

    assert caught.value.code is ErrorCode.INTERNAL and caught.value.provider == "mock"


# -- once per logical request -------------------------------------------------------------------


async def test_providers_receive_the_loaded_images_and_load_nothing() -> None:
    seen: list[LoadedInputs] = []

    async def record(request: ImageRequest, context: ProviderContext) -> None:
        seen.append(context.inputs)

    provider = FakeProvider(behaviour=record)
    loader = CountingLoader()
    runtime = make_runtime(provider, inputs=loader)
    await runtime.execute(
        ImageRequest.model_validate(
            {"operation": "generate", "prompt": "p", "reference_images": [inline(BLUE)]}
        )
    )

    [inputs] = seen
    assert [image.data for image in inputs.reference_images] == [BLUE]
    assert inputs.reference_images[0].info.media_type == "image/png"
    assert loader.loaded == ["base64"]


async def test_a_fan_out_and_a_fallback_share_one_load() -> None:
    failing = MockProvider(MockSettings(name="first", native_count=8, failure_rate=1.0))
    provider, inner = fanned_mock()
    loader = CountingLoader()
    runtime = make_runtime(failing, provider, inputs=loader)
    request = edit(
        reference_images=[inline(BLUE)],
        parameters={"size": "8x8", "n": 4},
        routing={
            "provider": "first",
            "fallbacks": [{"provider": "mock"}],
            "fallback_policy": "on_error",
        },
    )

    response = await runtime.execute(request)

    assert response.provider == "mock" and len(response.data) == 4
    assert inner.calls == 4  # four fan-out chunks after one failed route
    assert loader.loaded == ["base64", "base64"]  # images[0] and reference_images[0], once


@pytest.mark.usefixtures("no_external_network")
async def test_a_remote_input_is_fetched_once_for_a_whole_fan_out() -> None:
    async with local_server() as server:
        server.routes["/source.png"] = Route(headers={"Content-Type": "image/png"}, body=RED)
        policy = RemoteFetchPolicy(
            enabled=True, allowed_ports=frozenset({server.port}), allow_private_networks=True
        )
        loader = InputLoader([], remote=RemoteImageFetcher(policy))
        provider, inner = fanned_mock()
        runtime = make_runtime(provider, inputs=loader)
        url = {"type": "url", "url": f"{server.origin}/source.png"}

        response = await runtime.execute(edit(images=[url], parameters={"size": "8x8", "n": 6}))

    assert len(response.data) == 6 and inner.calls == 6
    assert [seen.path for seen in server.seen] == ["/source.png"]


# -- events, timings, errors and cancellation ------------------------------------------------------


async def test_loading_is_reported_before_the_provider_runs_and_timed() -> None:
    events: list[ProviderEventT] = []

    async def sink(event: ProviderEventT) -> None:
        events.append(event)

    provider, _ = fanned_mock()
    runtime = make_runtime(provider, inputs=CountingLoader(delay=0.05))
    response = await runtime.execute(edit(), ExecutionContext(events=sink))

    assert isinstance(events[0], ProgressEvent) and events[0].stage == "loading_inputs"
    assert any(isinstance(event, StartedEvent) for event in events[1:])
    assert response.timings.input_ms >= 40

    events.clear()
    plain = await runtime.execute(
        ImageRequest.model_validate({"operation": "generate", "prompt": "p"}),
        ExecutionContext(events=sink),
    )
    assert not any(isinstance(e, ProgressEvent) and e.stage == "loading_inputs" for e in events)
    assert plain.timings.input_ms == 0


async def test_an_input_error_fails_the_request_before_any_provider_call() -> None:
    provider, inner = fanned_mock()
    runtime = make_runtime(provider)
    jpeg_as_png = {**inline(jpeg(4, 4)), "media_type": "image/png"}

    with pytest.raises(BridgeError) as caught:
        await runtime.execute(edit(images=[inline(RED), jpeg_as_png]))

    assert caught.value.code is ErrorCode.INPUT
    assert caught.value.details["field"] == "images[1]"
    assert caught.value.details["detected_media_type"] == "image/jpeg"
    assert inner.calls == 0


async def test_cancellation_while_loading_stops_the_request() -> None:
    provider, inner = fanned_mock()
    runtime = make_runtime(provider, inputs=CountingLoader(delay=30), cancellation_grace_ms=50)
    token = CancelToken()
    task = asyncio.create_task(runtime.execute(edit(), ExecutionContext(cancellation=token)))
    await asyncio.sleep(0.05)
    token.cancel("cancelled")

    with pytest.raises(BridgeError) as caught:
        await asyncio.wait_for(task, 5)

    assert caught.value.code is ErrorCode.CANCELLED
    assert not caught.value.outcome_unknown  # nothing was dispatched
    assert inner.calls == 0
