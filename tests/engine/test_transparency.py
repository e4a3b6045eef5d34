"""Transparent-background planning, and the behaviours the original's transparency.rs tests
check."""

from __future__ import annotations

from typing import Any

import pytest

from imagebridge.contract import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.transparency import choose_key_color, prepare_transparency
from tests.support.capabilities import capabilities

NATIVE = {"backgrounds": ["auto", "opaque", "transparent"], "transparent_background": "native"}
EMULATED = {"backgrounds": ["auto", "opaque"], "transparent_background": "emulated"}


def request(prompt: str = "a red fox", **fields: Any) -> ImageRequest:
    body: dict[str, Any] = {
        "operation": "generate",
        "prompt": prompt,
        "parameters": {"background": "transparent", **fields.pop("parameters", {})},
    }
    body.update(fields)
    return ImageRequest.model_validate(body)


def test_auto_uses_native_alpha_when_available() -> None:
    prepared = prepare_transparency(request(), capabilities(**NATIVE))
    assert prepared.plan is None
    assert prepared.request.parameters.background.value == "transparent"
    assert [(n.field, n.effective, n.reason) for n in prepared.normalizations] == [
        ("output.transparency.mode", "native", "provider_supports_native_alpha")
    ]


def test_auto_uses_prompt_aware_chroma_key_when_native_alpha_is_missing() -> None:
    prepared = prepare_transparency(request("an emerald green dragon"), capabilities(**EMULATED))
    assert prepared.plan is not None
    assert prepared.plan.key_color == "#ff00ff"
    assert "#ff00ff" in prepared.request.prompt
    assert prepared.request.parameters.background.value == "auto"
    reasons = [n.reason for n in prepared.normalizations]
    assert reasons == [
        "provider_alpha_emulated_with_local_chroma_key",
        "transparent_result_via_chroma_key_postprocessing",
        "prompt_aware_chroma_key_selection",
    ]


def test_opaque_requests_pass_through() -> None:
    plain = ImageRequest.model_validate({"operation": "generate", "prompt": "x"})
    prepared = prepare_transparency(plain, capabilities())
    assert prepared.request is plain and prepared.plan is None and not prepared.normalizations


def test_unsupported_transparency_is_refused_in_auto_mode() -> None:
    with pytest.raises(BridgeError) as caught:
        prepare_transparency(request(), capabilities())
    assert caught.value.field == "parameters.background"


def test_explicit_chroma_key_is_allowed_without_provider_support() -> None:
    req = request(output={"transparency": {"mode": "chroma_key", "key_color": "00FF00"}})
    prepared = prepare_transparency(req, capabilities())
    assert prepared.plan is not None and prepared.plan.key_color == "#00ff00"
    assert prepared.normalizations[-1].reason == "explicit_chroma_key"
    assert prepared.normalizations[-1].requested == "00FF00"


def test_native_mode_needs_native_support() -> None:
    with pytest.raises(BridgeError) as caught:
        prepare_transparency(
            request(output={"transparency": {"mode": "native"}}), capabilities(**EMULATED)
        )
    assert caught.value.field == "output.transparency.mode"
    assert caught.value.details["requested"] == "native"


def test_jpeg_is_refused_in_strict_and_switched_to_png_otherwise() -> None:
    jpeg = {"output_format": "jpeg", "output_compression": 80}
    with pytest.raises(BridgeError) as caught:
        prepare_transparency(request(parameters=jpeg), capabilities(**EMULATED))
    assert caught.value.field == "parameters.output_format"
    prepared = prepare_transparency(
        request(parameters=jpeg, policies={"compatibility": "normalize"}), capabilities(**EMULATED)
    )
    params = prepared.request.parameters
    assert params.output_format.value == "png" and params.output_compression is None
    assert "transparent_output_requires_alpha_capable_format" in [
        n.reason for n in prepared.normalizations
    ]


def test_opaque_background_is_used_when_auto_is_not_offered() -> None:
    prepared = prepare_transparency(
        request(), capabilities(backgrounds=["opaque"], transparent_background="emulated")
    )
    assert prepared.request.parameters.background.value == "opaque"


@pytest.mark.parametrize(
    ("prompt", "color"),
    [
        ("a red fox", "#00ff00"),
        ("an emerald green dragon", "#ff00ff"),
        ("a green frog on a pink lily", "#0000ff"),
        ("a blue whale", "#00ff00"),
        ("a rosary on a green table", "#ff00ff"),  # whole words: "rosa" is not inside "rosary"
    ],
)
def test_key_color_choice(prompt: str, color: str) -> None:
    assert choose_key_color(prompt) == color
