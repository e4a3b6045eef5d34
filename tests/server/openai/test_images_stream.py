"""``stream: true`` on the OpenAI-compatible routes, read by the official ``openai`` SDK.

The SDK's own iterators (sync and async) decode every stream into its event types; the
clients keep the SDK's default retries (``max_retries=2``), so a failure that would be
retried shows up as extra provider calls.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types import (
    ImageEditCompletedEvent,
    ImageEditPartialImageEvent,
    ImageGenCompletedEvent,
    ImageGenPartialImageEvent,
)

from imagebridge.server import ServerOptions
from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_of, png, with_mock
from tests.server.rawhttp import open_request, read_until
from tests.support.fakes import FakeProvider
from tests.support.waiting import wait_until

TOKEN = "stream-test-token"


@pytest.fixture(scope="module")
def bridge(serve_module: ServeFactory) -> LiveServer:
    return serve_module('server.bearer_token_env="BRIDGE_TOKEN"', env={"BRIDGE_TOKEN": TOKEN})


def sync_client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=TOKEN)  # default retries


def async_client(server: LiveServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=TOKEN)


def mock_calls(server: LiveServer) -> int:
    mock = mock_of(server)
    return mock.calls


def bridge_index(event: Any) -> int:
    extension = getattr(event, "imagegen_bridge", None)
    assert isinstance(extension, dict), event
    index: int = extension["index"]
    return index


def check_order(events: list[Any], partial: type, completed: type, n: int, partials: int) -> None:
    """Every partial image first (``partials`` per image), then ``n`` completed images."""
    kinds = [type(event) for event in events]
    assert kinds == [partial] * (n * partials) + [completed] * n, kinds
    for index in range(n):
        mine = [e.partial_image_index for e in events[: n * partials] if bridge_index(e) == index]
        assert mine == list(range(partials))
    assert [bridge_index(event) for event in events[n * partials :]] == list(range(n))
    for event in events:
        image = base64.b64decode(event.b64_json)
        assert image.startswith(b"\x89PNG")
        assert event.output_format == "png" and event.background == "auto"
    for event in events[n * partials :]:
        assert event.size == "64x64"
        assert event.usage.input_tokens_details.image_tokens >= 0
        assert event.usage.total_tokens == event.usage.input_tokens + event.usage.output_tokens
        assert event.usage.output_tokens > 0
        assert completed.model_validate(event.model_dump(), strict=True) is not None


@pytest.mark.parametrize("n", [1, 2])
def test_generate_streams_partials_then_completed_sync(bridge: LiveServer, n: int) -> None:
    before = mock_calls(bridge)
    stream = sync_client(bridge).images.generate(
        model="gpt-image-1",
        prompt=f"a streamed paper fox {n}",
        size="64x64",
        n=n,
        stream=True,
        partial_images=2,
    )
    events = list(stream)
    check_order(events, ImageGenPartialImageEvent, ImageGenCompletedEvent, n, 2)
    assert all(event.type.startswith("image_generation.") for event in events)
    assert mock_calls(bridge) - before == n  # the mock makes one image per call
    # the same images as the JSON answer (the mock draws the same image for the same prompt)
    answer = sync_client(bridge).images.generate(
        model="gpt-image-1", prompt=f"a streamed paper fox {n}", size="64x64", n=n
    )
    assert answer.data is not None
    assert [e.b64_json for e in events[2 * n :]] == [item.b64_json for item in answer.data]


@pytest.mark.parametrize("n", [1, 2])
async def test_generate_streams_with_the_async_iterator(bridge: LiveServer, n: int) -> None:
    stream = await async_client(bridge).images.generate(
        model="gpt-image-1",
        prompt="an async streamed fox",
        size="64x64",
        n=n,
        stream=True,
        partial_images=3,
    )
    events = [event async for event in stream]
    check_order(events, ImageGenPartialImageEvent, ImageGenCompletedEvent, n, 3)


@pytest.mark.parametrize("n", [1, 2])
def test_edit_streams_partials_then_completed_sync(
    bridge: LiveServer, tmp_path: Path, n: int
) -> None:
    source = tmp_path / "source.png"
    source.write_bytes(png(64, 64))
    with source.open("rb") as image:
        stream = sync_client(bridge).images.edit(
            image=image,
            prompt="make it blue",
            size="64x64",
            n=n,
            stream=True,
            partial_images=1,
        )
        events = list(stream)
    check_order(events, ImageEditPartialImageEvent, ImageEditCompletedEvent, n, 1)
    assert all(event.type.startswith("image_edit.") for event in events)


@pytest.mark.parametrize("n", [1, 2])
async def test_edit_streams_with_the_async_iterator(bridge: LiveServer, n: int) -> None:
    stream = await async_client(bridge).images.edit(
        image=("source.png", png(64, 64), "image/png"),
        prompt="make it green",
        size="64x64",
        n=n,
        stream=True,
        partial_images=2,
    )
    events = [event async for event in stream]
    check_order(events, ImageEditPartialImageEvent, ImageEditCompletedEvent, n, 2)


def test_without_partial_images_only_completed_events_arrive(bridge: LiveServer) -> None:
    stream = sync_client(bridge).images.generate(
        model="gpt-image-1", prompt="no previews", size="64x64", stream=True
    )
    events = list(stream)
    assert [type(event) for event in events] == [ImageGenCompletedEvent]


def test_stream_false_is_the_json_answer(bridge: LiveServer) -> None:
    answer = sync_client(bridge).images.generate(
        model="gpt-image-1", prompt="not streamed", size="64x64", stream=False
    )
    assert answer.data is not None and answer.data[0].b64_json


def test_a_failure_before_any_event_is_an_http_error_not_retried(bridge: LiveServer) -> None:
    before = mock_calls(bridge)
    with pytest.raises(openai.APIStatusError) as caught:
        sync_client(bridge).images.generate(
            model="gpt-image-1",
            prompt="[mock:fail=safety_rejected] refused fox",
            size="64x64",
            stream=True,
            partial_images=2,
        )
    assert caught.value.status_code == 422
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.code == "moderation_blocked"
    assert mock_calls(bridge) - before == 1  # the SDK's retries did not run it again


def test_a_failure_after_partial_images_is_the_sdks_error_event(bridge: LiveServer) -> None:
    before = mock_calls(bridge)
    stream = sync_client(bridge).images.generate(
        model="gpt-image-1",
        prompt="[mock:fail-output=0] fails after its previews",
        size="64x64",
        stream=True,
        partial_images=2,
    )
    seen: list[Any] = []
    with pytest.raises(openai.APIError) as caught:
        seen.extend(stream)  # keeps what arrived before the error
    assert [type(event) for event in seen] == [ImageGenPartialImageEvent] * 2
    body = caught.value.body
    assert isinstance(body, dict) and body["code"] == "upstream_error"
    assert body["imagegen_bridge"]["code"] == "upstream"
    assert mock_calls(bridge) - before == 1


def test_url_delivery_is_refused_in_a_stream_before_any_work(bridge: LiveServer) -> None:
    before = mock_calls(bridge)
    with pytest.raises(openai.BadRequestError) as caught:
        sync_client(bridge).images.generate(
            model="gpt-image-1",
            prompt="a linked stream",
            size="64x64",
            stream=True,
            response_format="url",
        )
    assert caught.value.param == "response_format"
    assert mock_calls(bridge) == before


def test_the_wire_has_heartbeats_and_no_proxy_buffering(serve: ServeFactory) -> None:
    options = dataclasses.replace(ServerOptions(), heartbeat_interval=0.2)
    server = serve(options=options)
    body = {
        "prompt": "[mock:latency=1500] slow fox",
        "size": "16x16",
        "stream": True,
        "partial_images": 1,
    }
    with (
        server.client() as client,
        client.stream("POST", "/v1/images/generations", json=body) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["x-accel-buffering"] == "no"
        text = "".join(response.iter_text())
    frames = [frame for frame in text.split("\n\n") if frame]
    assert ": heartbeat" in frames
    events = [frame for frame in frames if not frame.startswith(":")]
    names = [frame.split("\n")[0] for frame in events]
    assert names == ["event: image_generation.partial_image", "event: image_generation.completed"]
    completed = json.loads(events[-1].split("\n")[1].removeprefix("data: "))
    assert completed["type"] == "image_generation.completed"
    assert set(completed) >= {"b64_json", "size", "quality", "background", "output_format",
                              "created_at", "usage", "imagegen_bridge"}  # fmt: skip
    assert "started" not in text and "progress" not in text


@pytest.mark.parametrize("when", ["before any event", "after a partial image"])
def test_a_client_that_leaves_cancels_the_provider_under_the_cancel_policy(
    serve: ServeFactory, when: str
) -> None:
    """``server.sync.on_disconnect = "cancel"`` (the default keeps a generation whose
    provider call began: tests/server/execution/test_keep_on_disconnect.py)."""
    server = serve('server.sync.on_disconnect="cancel"')
    mock = mock_of(server)
    # with previews, the first arrives after a quarter of the latency, the image at its end
    partials = 0 if when == "before any event" else 3
    body = {
        "prompt": "[mock:latency=12000] abandoned",
        "size": "16x16",
        "stream": True,
        "partial_images": partials,
    }
    sock = open_request(server.port, "/v1/images/generations", body)
    try:
        assert wait_until(lambda: mock.in_flight == 1)
        if partials:
            assert b"partial_image" in read_until(sock, b"image_generation.partial_image")
    finally:
        sock.close()
    assert wait_until(lambda: mock.cancellations == 1 and mock.in_flight == 0)


def test_previews_beyond_the_providers_are_clamped_not_refused(serve: ServeFactory) -> None:
    # OpenAI's partial_images is an upper bound; a provider that makes none still streams
    server = serve(providers=with_mock(FakeProvider("no-previews")))
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused")
    stream = client.images.generate(
        model="gpt-image-1",
        prompt="a fox without previews",
        stream=True,
        partial_images=2,
        extra_body={"imagegen_bridge": {"provider": "no-previews"}},
    )
    events = list(stream)
    assert [type(event) for event in events] == [ImageGenCompletedEvent]
    extension = bridge_extension(events[0])
    assert extension["provider"] == "no-previews"
    assert {
        "field": "partial_images",
        "requested": 2,
        "effective": 0,
        "reason": "clamped_to_provider_range",
    } in extension["normalizations"]


def bridge_extension(event: Any) -> dict[str, Any]:
    extension = getattr(event, "imagegen_bridge", None)
    assert isinstance(extension, dict)
    return extension
