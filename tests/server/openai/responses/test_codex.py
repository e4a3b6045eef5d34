"""The Responses API over ``codex-responses`` and the Codex backend mock (the real
provider's code path: the backend's SSE folded, partial images forwarded)."""

from __future__ import annotations

import base64
from typing import Any

from tests.server.conftest import LiveServer
from tests.server.openai.responses.conftest import CODEX_SIZE, answer, sdk, stream
from tests.support.codex_backend import CodexBackend

TOOL = {"type": "image_generation", "size": CODEX_SIZE}


def _events(server: LiveServer, tool: dict[str, Any]) -> list[dict[str, Any]]:
    events, _ = stream(server, input="a red fox", tools=[tool])
    return events


def test_a_response_is_made_by_codex(codex_served: LiveServer, codex_backend: CodexBackend) -> None:
    document = answer(codex_served, input="a red fox", tools=[TOOL])
    call = document["output"][0]
    assert base64.b64decode(call["result"]).startswith(b"\x89PNG")
    assert call["size"] == CODEX_SIZE
    assert document["imagegen_bridge"]["provider"] == "codex-responses"
    assert codex_backend.calls("responses") == 1


def test_codex_previews_are_streamed_up_to_the_asked_number(
    codex_served: LiveServer,
) -> None:
    asked = _events(codex_served, {**TOOL, "partial_images": 1})
    partials = [e for e in asked if e["type"] == "response.image_generation_call.partial_image"]
    assert [e["partial_image_index"] for e in partials] == [0]
    assert asked[-1]["type"] == "response.completed"
    none = _events(codex_served, TOOL)
    assert not [e for e in none if e["type"].endswith("partial_image")]
    assert [e["sequence_number"] for e in none] == list(range(len(none)))


def test_a_codex_failure_after_a_preview_is_response_failed(
    codex_served: LiveServer, codex_backend: CodexBackend
) -> None:
    codex_backend.set_default("failed_after_partial")
    events = _events(codex_served, {**TOOL, "partial_images": 2})
    kinds = [event["type"] for event in events]
    assert "response.image_generation_call.partial_image" in kinds
    assert kinds[-1] == "response.failed"
    assert kinds.count("response.failed") == 1
    assert "response.completed" not in kinds
    failed = events[-1]["response"]
    assert failed["error"]["message"]
    assert failed["imagegen_bridge"]["error"]["code"]


def test_the_sdk_streams_from_codex(codex_served: LiveServer) -> None:
    stream = sdk(codex_served).responses.create(
        model="gpt-5.5", input="a red fox", tools=[{**TOOL, "partial_images": 2}], stream=True
    )
    events = list(stream)
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    assert events[-1].response.output[0].type == "image_generation_call"
