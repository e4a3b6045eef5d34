"""``stream: true``: OpenAI's Responses events, in the SDK's types and order.

Each event's data is decoded with the SDK's own ``ResponseStreamEvent`` union, strictly;
the SDK's iterators (sync, async, and the ``responses.stream()`` helper) read the stream.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import openai
import pytest

from imagebridge.server import ServerOptions
from tests.server.conftest import LiveServer, ServeFactory
from tests.server.openai.responses.conftest import (
    TOOL,
    answer,
    async_sdk,
    sdk,
    stream,
    strict,
)

ORDER = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.image_generation_call.in_progress",
    "response.image_generation_call.generating",
    "response.image_generation_call.partial_image",
    "response.image_generation_call.partial_image",
    "response.image_generation_call.completed",
    "response.output_item.done",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]
PREVIEWS = {**TOOL, "partial_images": 2}


def _sse(server: LiveServer, **body: Any) -> tuple[list[dict[str, Any]], str]:
    return stream(server, **{"tools": [PREVIEWS], **body})


def test_the_events_come_in_the_sdks_order_numbered_from_zero(bridge: LiveServer) -> None:
    events, _ = _sse(bridge, input="a red fox")
    assert [event["type"] for event in events] == ORDER
    assert [event["sequence_number"] for event in events] == list(range(len(ORDER)))
    created, completed = events[0]["response"], events[-1]["response"]
    assert created["status"] == "in_progress"
    assert created["output"] == []
    assert completed["status"] == "completed"
    assert created["id"] == completed["id"]
    call_id = events[2]["item"]["id"]
    pending = {"type": "image_generation_call", "status": "in_progress", "result": None}
    assert events[2]["item"] == {"id": call_id, **pending, "action": "auto"}
    assert {event.get("item_id") for event in events[3:8]} == {call_id}
    partials = [event for event in events if event["type"].endswith("partial_image")]
    assert [event["partial_image_index"] for event in partials] == [0, 1]
    assert all(base64.b64decode(event["partial_image_b64"]) for event in partials)
    done = events[8]["item"]
    assert done == completed["output"][0]
    assert done["status"] == "completed"
    message = completed["output"][1]
    assert events[11]["delta"] == events[12]["text"] == message["content"][0]["text"]
    assert events[14]["item"] == message
    strict(completed)


def test_the_streamed_image_is_the_one_the_json_answer_holds(bridge: LiveServer) -> None:
    events, _ = _sse(bridge, input="a red fox")
    streamed = events[-1]["response"]["output"][0]["result"]
    document = answer(bridge, input="a red fox", tools=[PREVIEWS])
    assert streamed == document["output"][0]["result"]


def test_the_sync_iterator_reads_every_event(bridge: LiveServer) -> None:
    stream = sdk(bridge).responses.create(
        model="gpt-5.5", input="a red fox", tools=[PREVIEWS], stream=True
    )
    events = list(stream)
    assert [event.type for event in events] == ORDER
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response.output[0].type == "image_generation_call"


def test_the_async_iterator_reads_every_event(bridge: LiveServer) -> None:
    async def run() -> list[Any]:
        async with async_sdk(bridge) as client:
            stream = await client.responses.create(
                model="gpt-5.5", input="a red fox", tools=[PREVIEWS], stream=True
            )
            return [event async for event in stream]

    events = asyncio.run(run())
    assert [event.type for event in events] == ORDER


def test_the_stream_helper_assembles_the_final_response(bridge: LiveServer) -> None:
    with sdk(bridge).responses.stream(
        model="gpt-5.5", input="a red fox", tools=[PREVIEWS]
    ) as stream:
        final = stream.get_final_response()
    assert final.status == "completed"
    assert final.output_text == "Generated an image: 16x16 png."


def test_a_refusal_before_the_first_event_is_a_json_error(bridge: LiveServer) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        sdk(bridge).responses.create(
            model="gpt-5.5",
            input="a fox",
            tools=[{**PREVIEWS, "input_fidelity": "high"}],
            stream=True,
        )
    assert caught.value.param == "tools[0].input_fidelity"


@pytest.fixture(scope="module")
def quick(serve_module: ServeFactory) -> LiveServer:
    """A bridge whose idle streams send a heartbeat every 50 ms."""
    return serve_module(options=ServerOptions(heartbeat_interval=0.05))


def test_a_failure_once_streaming_is_response_failed(quick: LiveServer) -> None:
    events, text = _sse(quick, input="[mock:latency=400][mock:fail=upstream] a fox")
    assert ": heartbeat" in text
    assert [event["type"] for event in events] == [*ORDER[:4], "response.failed"]
    failed = events[-1]["response"]
    strict(failed)
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "server_error"
    assert failed["output"][0]["status"] == "failed"
    assert failed["imagegen_bridge"]["error"]["code"] == "upstream"
    assert [event["sequence_number"] for event in events] == list(range(5))


def test_a_content_refusal_is_the_content_policy_code(quick: LiveServer) -> None:
    events, _ = _sse(quick, input="[mock:latency=400][mock:fail=safety_rejected] a fox")
    assert events[-1]["response"]["error"]["code"] == "image_content_policy_violation"


def test_the_sdk_reads_response_failed_as_an_event(quick: LiveServer) -> None:
    stream = sdk(quick).responses.create(
        model="gpt-5.5",
        input="[mock:latency=400][mock:fail=upstream] a fox",
        tools=[TOOL],
        stream=True,
    )
    events = list(stream)
    assert events[-1].type == "response.failed"
    assert events[-1].response.error is not None
