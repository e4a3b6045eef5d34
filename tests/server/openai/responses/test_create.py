"""``POST /v1/responses`` answered as OpenAI's ``Response``, and its refusals by name.

Every answer here passes ``Response.model_validate(..., strict=True)`` (``answer()``). The
mock provider renders from the prompt (and, for an edit, the source image), so comparing
with the native ``/v1/images`` for the same prompt and source shows what the bridge asked for.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from imagebridge.config import load_config
from tests.server.conftest import LiveServer, ServeFactory
from tests.server.openai.responses.conftest import (
    TOOL,
    answer,
    async_sdk,
    create,
    refusal,
    sdk,
    strict,
)
from tests.support.images import png_b64, png_data_url


def _native(server: LiveServer, prompt: str, source: str | None = None) -> str:
    """The native bridge's image for ``prompt`` (an edit of ``source`` when given)."""
    body: dict[str, Any] = {"prompt": prompt, "operation": "generate", "parameters": {}}
    body["parameters"]["size"] = "16x16"
    if source is not None:
        body["operation"] = "edit"
        body["images"] = [{"type": "base64", "data": source}]
    with server.client() as client:
        response = client.post("/v1/images", json=body)
    assert response.status_code == 200, response.text
    result: str = response.json()["data"][0]["b64_json"]
    return result


def _call(document: dict[str, Any]) -> dict[str, Any]:
    call: dict[str, Any] = document["output"][0]
    assert call["type"] == "image_generation_call"
    return call


def test_a_string_input_is_one_image_call_then_an_assistant_message(bridge: LiveServer) -> None:
    result = sdk(bridge).responses.create(model="gpt-5.5", input="a red fox", tools=[TOOL])

    assert result.status == "completed"
    assert result.model == "gpt-5.5"  # the client's model, repeated
    call, message = result.output
    assert call.type == "image_generation_call"
    assert call.status == "completed"
    assert call.result is not None
    assert base64.b64decode(call.result).startswith(b"\x89PNG")
    assert (call.size, call.output_format, call.quality) == ("16x16", "png", "auto")
    assert call.background == "auto"
    assert call.revised_prompt == "a red fox (mock rendering)"
    assert call.id.startswith("ig_")
    assert result.id.startswith("resp_")
    assert message.type == "message"
    assert message.role == "assistant"
    assert message.content[0].type == "output_text"
    assert message.content[0].text == "Generated an image: 16x16 png."
    assert result.output_text == "Generated an image: 16x16 png."
    assert result.usage is not None
    assert result.usage.total_tokens == result.usage.input_tokens + result.usage.output_tokens
    assert result.tool_usage is not None
    assert result.tool_usage.image_gen.total_tokens > 0
    extension = result.model_extra["imagegen_bridge"] if result.model_extra else {}
    assert extension["provider"] == "mock"
    assert extension["model"] == "mock-image-1"
    assert call.result == _native(bridge, "a red fox")


def test_the_answer_repeats_the_request_as_openai_does(bridge: LiveServer) -> None:
    document = answer(
        bridge,
        input="a red fox",
        instructions="Draw.",
        metadata={"ticket": "42"},
        parallel_tool_calls=False,
        max_output_tokens=64,
        tool_choice={"type": "image_generation"},
        safety_identifier="user-4f1c",
        prompt_cache_key="fox",
        truncation="auto",
    )
    assert document["metadata"] == {"ticket": "42"}
    assert document["instructions"] == "Draw."
    assert document["parallel_tool_calls"] is False
    assert document["max_output_tokens"] == 64
    assert document["tool_choice"] == {"type": "image_generation"}
    assert document["tools"] == [TOOL]
    assert document["safety_identifier"] == "user-4f1c"
    assert document["prompt_cache_key"] == "fox"
    assert document["truncation"] == "auto"
    assert document["error"] is None
    assert document["incomplete_details"] is None
    assert document["background"] is False
    assert document["completed_at"] >= document["created_at"]


def test_instructions_then_system_messages_then_the_last_user_message_are_the_prompt(
    bridge: LiveServer,
) -> None:
    document = answer(
        bridge,
        instructions="Draw in watercolour.",
        input=[
            {"role": "user", "content": "a paper boat"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
            {"role": "developer", "content": "Keep it small."},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "a red fox"},
                {"type": "input_text", "text": "at dawn"},
            ]},
        ],
    )  # fmt: skip
    expected = "Draw in watercolour.\n\nKeep it small.\n\na red fox\nat dawn"
    assert _call(document)["revised_prompt"] == f"{expected} (mock rendering)"


def test_an_input_image_is_edited(bridge: LiveServer) -> None:
    source = png_b64(16, 16, (10, 120, 240))
    source_url = f"data:image/png;base64,{source}"
    document = answer(
        bridge,
        input=[{"role": "user", "content": [
            {"type": "input_text", "text": "make it warmer"},
            {"type": "input_image", "image_url": source_url, "detail": "auto"},
        ]}],
    )  # fmt: skip
    call = _call(document)
    assert call["result"] == _native(bridge, "make it warmer", source)
    assert call["action"] == "auto"
    assert document["output"][1]["content"][0]["text"] == "Edited the image: 16x16 png."


def test_with_action_generate_the_input_images_guide_a_new_image(bridge: LiveServer) -> None:
    source = png_b64(16, 16, (10, 120, 240))
    source_url = f"data:image/png;base64,{source}"
    tool = {**TOOL, "action": "generate"}
    document = answer(
        bridge,
        tools=[tool],
        input=[{"role": "user", "content": [
            {"type": "input_text", "text": "a fox like this one"},
            {"type": "input_image", "image_url": source_url, "detail": "low"},
        ]}],
    )  # fmt: skip
    assert _call(document)["action"] == "generate"
    assert document["output"][1]["content"][0]["text"] == "Generated an image: 16x16 png."
    edited = _native(bridge, "a fox like this one", source)
    assert _call(document)["result"] != edited


def test_a_follow_up_edits_the_earlier_image_sent_back_as_history(bridge: LiveServer) -> None:
    first = answer(bridge, input="a red fox")
    earlier = _call(first)
    history = [
        {"role": "user", "content": "a red fox"},
        earlier,
        first["output"][1],
        {"role": "user", "content": "make it blue"},
    ]
    follow_up = answer(bridge, input=history)
    assert _call(follow_up)["result"] == _native(bridge, "make it blue", earlier["result"])

    fresh = answer(bridge, input=history, tools=[{**TOOL, "action": "generate"}])
    assert _call(fresh)["result"] == _native(bridge, "make it blue")


def test_a_mask_is_the_image_tools_input_image_mask(bridge: LiveServer) -> None:
    source = png_b64(16, 16, (10, 120, 240))
    source_url = f"data:image/png;base64,{source}"
    mask = png_data_url(16, 16, (0, 0, 0, 0), mode="RGBA")
    tool = {**TOOL, "input_image_mask": {"image_url": mask}}
    document = answer(
        bridge,
        tools=[tool],
        input=[{"role": "user", "content": [
            {"type": "input_text", "text": "fill the hole"},
            {"type": "input_image", "image_url": source_url, "detail": "auto"},
        ]}],
    )  # fmt: skip
    assert _call(document)["status"] == "completed"


_IMAGE = {
    "type": "input_image",
    "image_url": png_data_url(),
    "detail": "auto",
}
_TEXT = {"type": "input_text", "text": "a fox"}

REFUSALS: list[tuple[str, dict[str, Any], int, str]] = [
    ("file_id image", {"input": [{"role": "user", "content": [
        _TEXT, {"type": "input_image", "file_id": "file-123", "detail": "auto"}]}]},
     400, "input[0].content[1].file_id"),
    ("input_file", {"input": [{"role": "user", "content": [
        _TEXT, {"type": "input_file", "file_id": "file-123"}]}]},
     400, "input[0].content[1]"),
    ("a function call item", {"input": [
        {"role": "user", "content": "a fox"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]},
     400, "input[1]"),
    ("an item reference", {"input": [{"type": "item_reference", "id": "ig_1"}]}, 400, "input[0]"),
    ("an image url of another scheme", {"input": [{"role": "user", "content": [
        _TEXT, {"type": "input_image", "image_url": "ftp://example/x.png", "detail": "auto"}]}]},
     422, "input[0].content[1].image_url"),
    ("an image in a system message", {"input": [{"role": "system", "content": [_IMAGE]}]},
     400, "input[0].content[0]"),
    ("an unknown content part", {"input": [{"role": "user", "content": [
        {"type": "input_audio", "data": "x"}]}]},
     422, "input[0].content[0].type"),
    ("an unknown key in a part", {"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "x", "colour": "red"}]}]},
     422, "input[0].content[0].colour"),
    ("a function tool", {"tools": [{"type": "function", "name": "f", "parameters": {}}]},
     400, "tools[0]"),
    ("web search beside the image tool", {"tools": [TOOL, {"type": "web_search"}]},
     400, "tools[1]"),
    ("two image tools", {"tools": [TOOL, TOOL]}, 400, "tools[1]"),
    ("no tools", {"tools": []}, 400, "tools"),
    ("tool_choice none", {"tool_choice": "none"}, 400, "tool_choice"),
    ("tool_choice a function", {"tool_choice": {"type": "function", "name": "f"}},
     400, "tool_choice"),
    ("allowed tools without the image tool", {"tool_choice": {
        "type": "allowed_tools", "mode": "auto", "tools": [{"type": "web_search"}]}},
     400, "tool_choice"),
    ("structured output", {"text": {"format": {"type": "json_object"}}}, 400, "text.format"),
    ("background without store", {"background": True, "store": False}, 400, "store"),
    ("previous_response_id", {"previous_response_id": "resp_1"}, 400, "previous_response_id"),
    ("conversation", {"conversation": "conv_1"}, 400, "conversation"),
    ("a saved prompt", {"prompt": {"id": "pmpt_1"}}, 400, "prompt"),
    ("no tool calls", {"max_tool_calls": 0}, 400, "max_tool_calls"),
    ("too much metadata", {"metadata": {str(i): "v" for i in range(17)}}, 422, "metadata"),
    ("an unknown field", {"colour": "red"}, 422, "colour"),
    ("no input", {"input": None}, 422, "input"),
    ("a tool size", {"tools": [{**TOOL, "size": "big"}]}, 422, "tools[0].size"),
    ("gif", {"tools": [{**TOOL, "output_format": "gif"}]}, 400, "tools[0].output_format"),
    ("svg authoring", {"tools": [{**TOOL, "svg": {"model": "x"}}]}, 400, "tools[0].svg"),
    ("gif frames", {"tools": [{**TOOL, "frame_count": 4}]}, 400, "tools[0].frame_count"),
    ("an unknown tool field", {"tools": [{**TOOL, "colour": "red"}]}, 422, "tools[0].colour"),
    ("a mask file id", {"tools": [{**TOOL, "input_image_mask": {"file_id": "file-1"}}]},
     400, "tools[0].input_image_mask.file_id"),
    ("compression above 100", {"tools": [{**TOOL, "output_compression": 101,
                                          "output_format": "jpeg"}]},
     422, "tools[0].output_compression"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_what_is_not_served_is_refused_by_name(
    bridge: LiveServer, body: dict[str, Any], status: int, param: str
) -> None:
    body.setdefault("input", "a fox")
    code, error = refusal(bridge, **body)
    assert (code, error["param"]) == (status, param), error


ENGINE_REFUSALS: list[tuple[str, dict[str, Any], int, str]] = [
    # the engine's own checks, named as the Responses request's fields
    ("input_fidelity without an image", {"tools": [{**TOOL, "input_fidelity": "high"}]},
     422, "tools[0].input_fidelity"),
    ("action edit without an image", {"tools": [{**TOOL, "action": "edit"}]},
     422, "tools[0].action"),
    ("an unknown provider", {"imagegen_bridge": {"provider": "nope"}},
     404, "imagegen_bridge.provider"),
    ("a remote image while remote inputs are off", {"input": [{"role": "user", "content": [
        _TEXT, {"type": "input_image", "image_url": "http://127.0.0.1:9/x.png",
                "detail": "auto"}]}]},
     400, "input[0].content[1].image_url"),
    ("an image that is not one", {"input": [{"role": "user", "content": [
        _TEXT, {"type": "input_image", "image_url": "data:image/png;base64,aGVsbG8=",
                "detail": "auto"}]}]},
     400, "input[0].content[1].image_url"),
    ("an earlier result that is not an image", {"input": [
        {"type": "image_generation_call", "id": "ig_1", "status": "completed",
         "result": "aGVsbG8="},
        {"role": "user", "content": "make it blue"}]},
     400, "input[0].result"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [case[1:] for case in ENGINE_REFUSALS],
    ids=[case[0] for case in ENGINE_REFUSALS],
)
def test_the_engines_refusals_name_the_responses_field(
    bridge: LiveServer, body: dict[str, Any], status: int, param: str
) -> None:
    body.setdefault("input", "a fox")
    code, error = refusal(bridge, **body)
    assert (code, error["param"]) == (status, param), error


def test_fields_without_effect_are_accepted_with_a_warning(bridge: LiveServer) -> None:
    document = answer(
        bridge,
        input="a fox",
        temperature=0.2,
        top_p=0.9,
        reasoning={"effort": "low"},
        text={"format": {"type": "text"}, "verbosity": "low"},
        service_tier="flex",
        include=["message.output_text.logprobs"],
    )
    warnings = document["imagegen_bridge"]["warnings"]
    for warning in (
        "openai_temperature_ignored",
        "openai_top_p_ignored",
        "openai_reasoning_ignored",
        "openai_text_verbosity_ignored",
        "openai_service_tier_ignored",
    ):
        assert warning in warnings
    assert document["service_tier"] == "default"


def test_a_tool_quality_above_high_is_mapped_with_a_normalization(bridge: LiveServer) -> None:
    document = answer(bridge, input="a fox", tools=[{**TOOL, "quality": "xhigh"}])
    assert _call(document)["quality"] == "high"
    normalizations = document["imagegen_bridge"]["normalizations"]
    assert {
        "field": "tools[0].quality",
        "requested": "xhigh",
        "effective": "high",
        "reason": "openai_quality_mapped_to_provider_level",
    } in normalizations


def test_the_image_tools_settings_reach_the_image(bridge: LiveServer) -> None:
    tool = {**TOOL, "output_format": "jpeg", "output_compression": 60, "background": "opaque"}
    document = answer(bridge, input="a fox", tools=[tool])
    call = _call(document)
    assert base64.b64decode(call["result"]).startswith(b"\xff\xd8")
    assert (call["output_format"], call["background"]) == ("jpeg", "opaque")


@pytest.fixture(scope="module")
def routed(serve_module: ServeFactory) -> LiveServer:
    return serve_module(
        'providers.mock.models=["mock-image-1", "mock-image-hd"]',
        'server.openai.responses.models."gpt-5.5".provider="mock"',
        'server.openai.responses.models."gpt-5.5".model="mock-image-hd"',
        'server.openai.unknown_models="refuse"',
    )


def test_the_responses_model_table_routes_an_agents_model(routed: LiveServer) -> None:
    document = answer(routed, model="gpt-5.5", input="a fox")
    assert document["model"] == "gpt-5.5"
    assert document["imagegen_bridge"]["model"] == "mock-image-hd"


def test_a_model_outside_the_table_is_recorded_and_runs_on_the_default_route(
    routed: LiveServer,
) -> None:
    document = answer(routed, model="gpt-4.1-mini", input="a fox")
    assert document["model"] == "gpt-4.1-mini"
    assert document["imagegen_bridge"]["model"] == "mock-image-1"
    assert document["imagegen_bridge"]["normalizations"] == []


def test_the_tools_model_is_routed_as_the_images_api_routes_it(routed: LiveServer) -> None:
    document = answer(
        routed, model="gpt-5.5", input="a fox", tools=[{**TOOL, "model": "mock-image-1"}]
    )
    assert document["imagegen_bridge"]["model"] == "mock-image-1"
    status, error = refusal(routed, input="a fox", tools=[{**TOOL, "model": "gpt-image-2"}])
    assert (status, error["param"]) == (400, "tools[0].model")


def test_a_response_is_counted_under_its_own_route(serve: ServeFactory) -> None:
    live = serve("server.metrics.enabled=true")
    answer(live, input="a fox")
    with live.client() as client:
        text = client.get("/metrics").text
    lines = [line for line in text.splitlines() if line.startswith("imagegen_bridge_images_total")]
    assert any('route="responses"' in line and 'outcome="delivered"' in line for line in lines)


def test_the_sdks_async_client_decodes_the_answer(bridge: LiveServer) -> None:
    async def run() -> Any:
        async with async_sdk(bridge) as client:
            return await client.responses.create(model="gpt-5.5", input="a fox", tools=[TOOL])

    result = asyncio.run(run())
    assert result.output[0].type == "image_generation_call"
    strict(result.model_dump(mode="json", exclude_unset=True))


def test_a_refusal_is_the_sdks_exception_with_no_retry(bridge: LiveServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(bridge).responses.create(model="gpt-5.5", input="a fox", tools=[{"type": "web_search"}])
    assert caught.value.param == "tools[0]"
    response: httpx.Response = caught.value.response
    assert response.headers["x-should-retry"] == "false"


def test_a_request_without_the_body_it_needs_is_refused(bridge: LiveServer) -> None:
    response = create(bridge, input="a fox", tools="image_generation")
    assert response.status_code == 422
    assert response.json()["error"]["param"] == "tools"


def test_an_http_image_url_follows_the_remote_input_rules(serve: ServeFactory) -> None:
    live = serve("inputs.remote.enabled=true")
    status, error = refusal(
        live,
        input=[{"role": "user", "content": [
            _TEXT, {"type": "input_image", "image_url": "http://169.254.169.254/a.png",
                    "detail": "auto"}]}],
    )  # fmt: skip
    assert (status, error["param"]) == (400, "input[0].content[1].image_url")
    assert error["message"] == "remote image hostname resolves to a private or reserved address"


def test_a_responses_model_route_must_name_an_enabled_provider(tmp_path: Path) -> None:
    loaded = load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)},
        sets=['server.openai.responses.models."gpt-5.5".provider="openai"'],
        cwd=tmp_path,
    )
    fields = [issue.field for issue in loaded.issues]
    assert "server.openai.responses.models.gpt-5.5.provider" in fields
