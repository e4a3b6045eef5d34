"""The OpenAI Agents SDK (``openai-agents``) runs an agent with ``ImageGenerationTool``
against the bridge and gets the image, through the mock provider and through the
``codex-responses`` provider over the Codex backend mock.

The agent's model is pointed at the bridge with an ``AsyncOpenAI`` client; tracing is
off (it would upload to OpenAI). The run ends on the bridge's assistant message, so the
agent calls the bridge once per turn.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    ImageGenerationTool,
    OpenAIResponsesModel,
    Runner,
    set_tracing_disabled,
)
from agents.items import ToolCallItem
from openai.types.responses.response_output_item import ImageGenerationCall

from tests.server.conftest import LiveServer
from tests.server.openai.responses.conftest import CODEX_SIZE, async_sdk
from tests.support.codex_backend import CodexBackend


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def _agent(size: str, client: Any) -> Agent[Any]:
    return Agent(
        name="painter",
        instructions="You draw what you are asked.",
        model=OpenAIResponsesModel(model="gpt-5.5", openai_client=client),
        tools=[ImageGenerationTool(tool_config={"type": "image_generation", "size": size})],
    )


def _images(items: list[Any]) -> list[bytes]:
    calls = [
        item.raw_item
        for item in items
        if isinstance(item, ToolCallItem) and isinstance(item.raw_item, ImageGenerationCall)
    ]
    return [base64.b64decode(call.result or "") for call in calls]


def _run_turns(server: LiveServer, size: str) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with async_sdk(server) as client:
            agent = _agent(size, client)
            first = await Runner.run(agent, "a red fox")
            history = [*first.to_input_list(), {"role": "user", "content": "make it blue"}]
            second = await Runner.run(agent, history)
            streamed = Runner.run_streamed(agent, "a paper boat")
            kinds = [event.type async for event in streamed.stream_events()]
            return {
                "first": first,
                "second": second,
                "streamed": streamed,
                "kinds": kinds,
            }

    return asyncio.run(run())


def _check(runs: dict[str, Any], width: int) -> None:
    first, second, streamed = runs["first"], runs["second"], runs["streamed"]
    [image] = _images(first.new_items)
    assert image.startswith(b"\x89PNG")
    assert int.from_bytes(image[16:20], "big") == width
    assert first.final_output == f"Generated an image: {width}x{width} png."
    assert len(first.raw_responses) == 1  # one call: the assistant message ends the turn
    [edited] = _images(second.new_items)
    assert edited.startswith(b"\x89PNG")
    assert second.final_output == f"Edited the image: {width}x{width} png."
    [streamed_image] = _images(streamed.new_items)
    assert streamed_image.startswith(b"\x89PNG")
    assert "raw_response_event" in runs["kinds"]
    assert streamed.final_output == f"Generated an image: {width}x{width} png."


def test_an_agent_with_the_image_tool_gets_the_image_from_the_mock(bridge: LiveServer) -> None:
    _check(_run_turns(bridge, "16x16"), 16)


def test_an_agent_with_the_image_tool_gets_the_image_from_codex(
    codex_served: LiveServer, codex_backend: CodexBackend
) -> None:
    runs = _run_turns(codex_served, CODEX_SIZE)
    _check(runs, 1024)
    first, follow_up, _ = codex_backend.requests_for("responses")
    # the follow-up sends the first turn's image to the backend as the image to edit
    assert "input_image" not in json.dumps(first.body)
    assert "input_image" in json.dumps(follow_up.body)
