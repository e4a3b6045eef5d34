"""Every create parameter and image-tool field of the installed ``openai`` SDK, sent by it.

The names come from the SDK's own types (``ResponseCreateParamsNonStreaming``, the
``ImageGeneration`` tool param), and closed value sets from their ``Literal``s, so a field
or value a new release adds is sent here without editing the test; a field the tables
below do not know fails ``test_the_tables_know_every_sdk_field``. Each call is served (an
answer the SDK's strict decoder accepts; a documented warning where the field has no
effect), or refused with a 4xx whose ``param`` names the field (docs/api-decisions.md,
"Responses").
"""

from __future__ import annotations

import json
import typing
from typing import Any

import openai
import pytest
from openai.types.responses import response_create_params, tool_param

from tests.server.conftest import LiveServer
from tests.server.openai.responses.conftest import TOOL, sdk, strict
from tests.server.openai.sdk_hints import literals
from tests.support.images import png_data_url

CREATE = typing.get_type_hints(response_create_params.ResponseCreateParamsNonStreaming)
IMAGE_TOOL = typing.get_type_hints(tool_param.ImageGeneration)

Outcome = str | tuple[int, str]
"""``"served"``, a warning the answer carries, or (status, param) of the refusal."""

SERVED = "served"
QUEUED = "queued"
"""Served in the background: the answer is the queued response (test_background.py)."""

CREATE_CASES: dict[str, list[tuple[Any, Outcome]] | Outcome] = {
    "access_programs": [({"cyber": "standard"}, "openai_access_programs_ignored")],
    "background": [(False, SERVED), (True, QUEUED)],
    "background_options": [({"completion_window": "soonest"}, (400, "background_options"))],
    "context_management": [
        ([{"type": "compaction", "compact_threshold": 1000}], "openai_context_management_ignored")
    ],
    "conversation": [("conv_1", (400, "conversation"))],
    "image": [({"context_compression": "auto"}, "openai_image_options_ignored")],
    "include": [(["message.input_image.image_url", "reasoning.encrypted_content"], SERVED)],
    "input": [("a paper fox", SERVED)],
    "instructions": [("Draw in ink.", SERVED)],
    "max_output_tokens": [(64, SERVED)],
    "max_tool_calls": [(1, SERVED), (0, (400, "max_tool_calls"))],
    "metadata": [({"ticket": "42"}, SERVED)],
    "model": [("gpt-5.5", SERVED), ("mock-image-1", SERVED)],
    "moderation": [({"model": "omni-moderation-latest"}, "openai_response_moderation_ignored")],
    "parallel_tool_calls": [(True, SERVED), (False, SERVED)],
    "previous_response_id": [("resp_1", (400, "previous_response_id"))],
    "prompt": [({"id": "pmpt_1"}, (400, "prompt"))],
    "prompt_cache_key": [("fox", SERVED)],
    "prompt_cache_options": [({"mode": "implicit"}, "openai_prompt_cache_ignored")],
    "prompt_cache_retention": "openai_prompt_cache_ignored",  # every literal
    "reasoning": [({"effort": "low"}, "openai_reasoning_ignored")],
    "safety_identifier": [("user-4f1c", SERVED)],
    "service_tier": "openai_service_tier_ignored",  # every literal; auto and default: below
    "store": [(True, SERVED), (False, SERVED)],
    "stream": [(False, SERVED)],  # true: test_stream.py
    "stream_options": [({"include_obfuscation": False}, SERVED)],
    "temperature": [(0.4, "openai_temperature_ignored")],
    "text": [
        ({"format": {"type": "text"}}, SERVED),
        ({"verbosity": "low"}, "openai_text_verbosity_ignored"),
        ({"format": {"type": "json_object"}}, (400, "text.format")),
    ],
    "tool_choice": [
        ("auto", SERVED),
        ("required", SERVED),
        ({"type": "image_generation"}, SERVED),
        (
            {"type": "allowed_tools", "mode": "required", "tools": [{"type": "image_generation"}]},
            SERVED,
        ),
        ("none", (400, "tool_choice")),
        ({"type": "web_search"}, (400, "tool_choice")),
    ],
    "tools": [([TOOL], SERVED), ([{"type": "web_search"}], (400, "tools[0]"))],
    "top_logprobs": [(3, "openai_top_logprobs_ignored")],
    "top_p": [(0.9, "openai_top_p_ignored")],
    "truncation": SERVED,  # every literal
    "user": [("user-legacy", SERVED)],
}
"""Field → (value, outcome) cases, or one outcome for every value of its closed set."""

LITERAL_OVERRIDES: dict[tuple[str, Any], Outcome] = {
    ("service_tier", "auto"): SERVED,
    ("service_tier", "default"): SERVED,
}

TOOL_CASES: dict[str, list[tuple[Any, Outcome]]] = {
    "type": [("image_generation", SERVED)],
    "complexity": [],  # every literal: warned, below
    "frame_count": [(4, (400, "tools[0].frame_count"))],
    "frame_duration_ms": [(100, (400, "tools[0].frame_duration_ms"))],
    "input_image_mask": [
        ({"image_url": "<mask>"}, SERVED),
        ({"file_id": "file-1"}, (400, "tools[0].input_image_mask.file_id")),
    ],
    "model": [("mock-image-1", SERVED), ("gpt-image-2", SERVED)],
    "output_compression": [(50, "openai_output_compression_ignored_for_png")],
    "partial_images": [(2, SERVED)],
    "size": [("24x16", SERVED)],
    "svg": [({"model": "svg-author"}, (400, "tools[0].svg"))],
}
TOOL_LITERALS: dict[tuple[str, Any], Outcome] = {
    ("output_format", "gif"): (400, "tools[0].output_format"),
    ("output_format", "svg"): (400, "tools[0].output_format"),
    ("complexity", "low"): "openai_complexity_ignored",
    ("complexity", "medium"): "openai_complexity_ignored",
    ("complexity", "high"): "openai_complexity_ignored",
}
"""Literal values of the tool whose outcome is not ``served``."""


def _create_cases() -> list[tuple[str, Any, Outcome]]:
    cases: list[tuple[str, Any, Outcome]] = []
    for name in sorted(CREATE):
        table = CREATE_CASES[name]
        if isinstance(table, list):
            cases.extend((name, value, outcome) for value, outcome in table)
            continue
        for value in literals(CREATE[name]):
            cases.append((name, value, LITERAL_OVERRIDES.get((name, value), table)))
    return cases


def _tool_cases() -> list[tuple[str, Any, Outcome]]:
    cases: list[tuple[str, Any, Outcome]] = []
    for name in sorted(IMAGE_TOOL):
        if name in TOOL_CASES:
            cases.extend((name, value, outcome) for value, outcome in TOOL_CASES[name])
        if name == "type":
            continue
        admitted = literals(IMAGE_TOOL[name])
        cases.extend((name, value, TOOL_LITERALS.get((name, value), SERVED)) for value in admitted)
    return cases


def test_the_tables_know_every_sdk_field() -> None:
    assert set(CREATE) == set(CREATE_CASES), "a create parameter the table does not know"
    for name, hint in IMAGE_TOOL.items():
        assert literals(hint) or name in TOOL_CASES, f"a new image tool field: {name}"


def _input_with_image() -> list[dict[str, Any]]:
    source = png_data_url(16, 16, (200, 30, 30))
    return [{"role": "user", "content": [
        {"type": "input_text", "text": "a paper fox"},
        {"type": "input_image", "image_url": source, "detail": "auto"},
    ]}]  # fmt: skip


def _send(server: LiveServer, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    client = sdk(server).responses.with_raw_response
    try:
        raw = client.create(**arguments)
    except openai.APIStatusError as error:
        return error.status_code, error.body if isinstance(error.body, dict) else {}
    return raw.http_response.status_code, json.loads(raw.http_response.text)


def _check(server: LiveServer, arguments: dict[str, Any], outcome: Outcome) -> None:
    status, body = _send(server, arguments)
    if isinstance(outcome, tuple):
        assert (status, body.get("param")) == outcome, body
        return
    assert status == 200, body
    strict(body)
    if outcome == QUEUED:
        assert (body["status"], body["background"], body["output"]) == ("queued", True, [])
        return
    assert body["output"][0]["status"] == "completed"
    if outcome != SERVED:
        assert outcome in body["imagegen_bridge"]["warnings"], body["imagegen_bridge"]


@pytest.mark.parametrize(
    ("name", "value", "outcome"),
    _create_cases(),
    ids=[f"{name}={value!r}" for name, value, _ in _create_cases()],
)
def test_every_create_parameter(
    bridge: LiveServer, name: str, value: Any, outcome: Outcome
) -> None:
    arguments: dict[str, Any] = {"model": "gpt-5.5", "input": "a paper fox", "tools": [TOOL]}
    arguments[name] = value
    _check(bridge, arguments, outcome)


@pytest.mark.parametrize(
    ("name", "value", "outcome"),
    _tool_cases(),
    ids=[f"{name}={value!r}" for name, value, _ in _tool_cases()],
)
def test_every_image_tool_field(
    bridge: LiveServer, name: str, value: Any, outcome: Outcome
) -> None:
    if name == "input_image_mask":
        mask = png_data_url(16, 16, (0, 0, 0, 0), mode="RGBA")
        value = {key: mask if item == "<mask>" else item for key, item in value.items()}
    tool: dict[str, Any] = {**TOOL, name: value}
    arguments = {"model": "gpt-5.5", "input": _input_with_image(), "tools": [tool]}
    _check(bridge, arguments, outcome)
