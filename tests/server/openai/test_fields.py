"""Every request field and value of the installed ``openai`` SDK, sent by the SDK itself.

The fields and their closed value sets are read from the SDK's own parameter types
(``ImageGenerateParams``, ``ImageEditParams``), so a field or value a new release adds is
sent here without editing the test; a field the table below does not know fails
``test_the_table_knows_every_sdk_field``. Each call either succeeds with an answer
``ImagesResponse.model_validate(..., strict=True)`` accepts, or fails with a 4xx whose
``param`` names the field, as the table says.
"""

from __future__ import annotations

import asyncio
import json
import typing
from typing import Any

import openai
import pytest
from openai.types import image_edit_params, image_generate_params
from openai.types.images_response import ImagesResponse

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import png
from tests.server.openai.sdk_hints import literals
from tests.support.images import png_bytes

GENERATE = typing.get_type_hints(image_generate_params.ImageGenerateParamsNonStreaming)
EDIT = typing.get_type_hints(image_edit_params.ImageEditParamsNonStreaming)

SAMPLES: dict[str, list[Any]] = {
    "prompt": ["a paper fox"],
    "model": ["gpt-image-2", "mock-image-1"],
    "n": [2],
    "output_compression": [50],
    "partial_images": [2],
    "frame_count": [4],
    "frame_duration_ms": [100],
    "safety_identifier": ["user-4f1c"],
    "user": ["user-legacy"],
    "stream": [False],
    "svg": ["<svg>"],
    "image": [],  # always sent on edits
    "mask": ["<mask>"],
    "markup": ["<markup>"],
}
"""Values for fields without a closed value set (closed sets are read from the SDK)."""

REFUSED: dict[tuple[str, Any], int] = {
    ("output_format", "gif"): 400,
    ("output_format", "svg"): 400,
    ("frame_count", 4): 400,
    ("frame_duration_ms", 100): 400,
    ("svg", "<svg>"): 400,
    ("markup", "<markup>"): 400,
}
"""(field, value) → the refusal status; ``param`` must name the field."""

WARNED = {"style": "openai_style_ignored", "complexity": "openai_complexity_ignored"}
MAPPED_QUALITIES = {"standard": "medium", "hd": "high", "xhigh": "high", "max": "high"}
PART_B = {("stream", True)}
"""Streams answer events, not an ``ImagesResponse``: tests/server/openai/test_images_stream.py."""


def _cases(hints: dict[str, Any]) -> list[tuple[str, Any]]:
    cases: list[tuple[str, Any]] = []
    for name in sorted(hints):
        admitted = literals(hints[name])
        if name == "model":
            admitted = []  # every ImageModel name: tests/server/openai/test_models.py
        values = admitted or SAMPLES[name]
        cases.extend((name, value) for value in values if (name, value) not in PART_B)
    return cases


def _mask(width: int, height: int) -> bytes:
    return png_bytes(width, height, (0, 0, 0, 0), mode="RGBA")


@pytest.fixture(scope="module")
def server(serve_module: ServeFactory) -> LiveServer:
    return serve_module()


def test_the_table_knows_every_sdk_field() -> None:
    for hints in (GENERATE, EDIT):
        for name, hint in hints.items():
            assert literals(hint) or name in SAMPLES, f"a new SDK field: {name}"


def _arguments(name: str, value: Any, *, edit: bool) -> dict[str, Any]:
    arguments: dict[str, Any] = {"prompt": "a paper fox", "size": "16x16"}
    if edit:
        arguments["image"] = ("source.png", png(16, 16), "image/png")
    if value == "<mask>":
        value = ("mask.png", _mask(16, 16), "image/png")
    elif value == "<svg>":
        value = {"model": "svg-author", "reasoning": {"effort": "low"}}
    elif value == "<markup>":
        value = ("markup.png", _mask(16, 16), "image/png")
    arguments[name] = value
    if name == "n":
        arguments["size"] = "8x8"
    return arguments


def _call(server: LiveServer, mode: str, edit: bool, arguments: dict[str, Any]) -> Any:
    base = f"{server.url}/v1"
    if mode == "sync":
        client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
        images = client.images.with_raw_response
        return (images.edit if edit else images.generate)(**arguments)

    async def run() -> Any:
        async with openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=0) as client:
            images = client.images.with_raw_response
            response = await (images.edit if edit else images.generate)(**arguments)
            await response.http_response.aread()
            return response

    return asyncio.run(run())


def _check(server: LiveServer, mode: str, edit: bool, name: str, value: Any) -> None:
    refusal = REFUSED.get((name, value))
    try:
        raw = _call(server, mode, edit, _arguments(name, value, edit=edit))
    except openai.APIStatusError as failure:
        assert refusal is not None, f"{name}={value!r}: {failure.status_code} {failure.message}"
        assert failure.status_code == refusal
        assert failure.param == name, failure.message
        return
    assert refusal is None, f"{name}={value!r} was accepted"
    body = json.loads(raw.http_response.text)
    decoded = ImagesResponse.model_validate(body, strict=True)
    assert decoded.data
    extension = body["imagegen_bridge"]
    if name in WARNED:
        assert WARNED[name] in extension["warnings"]
    if name == "quality":
        effective = MAPPED_QUALITIES.get(value, value)
        assert extension["effective"]["quality"] == effective
        if value in MAPPED_QUALITIES:
            assert {"field": "quality", "requested": value, "effective": effective} | {
                "reason": "openai_quality_mapped_to_provider_level"
            } in extension["normalizations"]
    if name == "n":
        assert len(decoded.data) == value
    if (name, value) == ("response_format", "url"):
        assert decoded.data[0].url is not None and decoded.data[0].b64_json is None
    if name in ("output_format", "background") and value != "auto":
        assert getattr(decoded, name) == value
    if name in ("safety_identifier", "user"):
        assert extension["effective"] is not None  # accepted; the user reaches the provider


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("name", "value"), _cases(GENERATE))
def test_every_generate_field(server: LiveServer, mode: str, name: str, value: Any) -> None:
    _check(server, mode, False, name, value)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("name", "value"), _cases(EDIT))
def test_every_edit_field(server: LiveServer, mode: str, name: str, value: Any) -> None:
    _check(server, mode, True, name, value)


def test_answers_carry_openai_usage_and_settings(server: LiveServer) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
    result = client.images.generate(
        prompt="three words here", size="24x16", quality="high", background="opaque"
    )
    assert result.usage is not None
    assert result.usage.input_tokens_details.text_tokens == 3
    assert result.usage.input_tokens_details.image_tokens == 0
    assert result.usage.output_tokens_details is not None
    assert result.usage.output_tokens_details.image_tokens == 100
    assert (result.size, result.quality, result.output_format, result.background) == (
        "24x16",
        "high",
        "png",
        "opaque",
    )


def test_safety_identifier_wins_over_user(server: LiveServer) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
    result = client.images.generate(
        prompt="fox", size="8x8", user="legacy", safety_identifier="hashed-id"
    )
    assert result.data is not None


def test_validation_refusals_name_the_field(server: LiveServer) -> None:
    with server.client() as raw:
        for body, param in (
            ({"prompt": "x", "n": "two"}, "n"),
            ({"prompt": "x", "quality": "ultra"}, "quality"),
            ({"prompt": "x", "size": "big"}, "size"),
            ({"prompt": 7}, "prompt"),
            ({"prompt": "x", "imagegen_bridge": {"provider": 3}}, "imagegen_bridge.provider"),
            ({"prompt": "x", "output_compression": 101}, "output_compression"),
        ):
            response = raw.post("/v1/images/generations", json=body)
            assert response.status_code in (400, 422), body
            assert response.json()["error"]["param"] == param, response.text
