"""``codex-images`` through the whole engine, against the loopback Codex backend mock."""

from __future__ import annotations

import base64
import io
import json
import uuid

from PIL import Image

from imagebridge.contract.errors import ErrorCode
from imagebridge.contract.response import Usage
from imagebridge.providers.codex.images import images_usage_url
from tests.support.codex_backend import BRIDGE_ACCOUNT, BRIDGE_TOKEN, CodexBackend, CodexBridge
from tests.support.images import png_data_url

IMAGES = {"provider": "codex-images"}


async def test_generation_calls_the_generations_route_like_codex(codex_bridge: CodexBridge) -> None:
    response = await codex_bridge.run("a lighthouse", routing=IMAGES)

    [call] = codex_bridge.backend.requests_for("images_generations")
    assert call.body == {
        "prompt": "a lighthouse",
        "background": "opaque",
        "model": "gpt-image-2",
        "quality": "auto",
        "size": "auto",
    }
    assert call.sent_token(BRIDGE_TOKEN) and call.sent_account_id(BRIDGE_ACCOUNT)
    assert call.headers["originator"] == "imagegen-bridge"
    assert call.headers["content-type"] == "application/json"
    uuid.UUID(call.headers["x-codex-image-turn-id"])
    assert "user-agent" not in call.headers
    assert codex_bridge.backend.calls("responses") == 0
    assert response.provider == "codex-images"
    assert response.model == "gpt-image-2"
    assert response.usage == Usage(input_tokens=12, output_tokens=34, total_tokens=46)
    assert response.revised_prompt is None
    assert (response.data[0].width, response.data[0].height) == (64, 64)


async def test_transparency_is_native_real_alpha(codex_bridge: CodexBridge) -> None:
    response = await codex_bridge.run(routing=IMAGES, parameters={"background": "transparent"})

    [call] = codex_bridge.backend.requests_for("images_generations")
    assert call.body["background"] == "transparent"
    image = Image.open(io.BytesIO(base64.b64decode(response.data[0].b64_json or "")))
    assert image.mode == "RGBA"
    reasons = [n.reason for n in response.normalizations]
    assert "validated_native_alpha" in reasons
    assert "transparent_background_postprocessed" not in response.warnings


async def test_edit_uses_the_edits_route_with_data_urls(codex_bridge: CodexBridge) -> None:
    source = png_data_url(8, 8, (9, 99, 199))

    await codex_bridge.run(
        "make it red",
        routing=IMAGES,
        operation="edit",
        images=[{"type": "data_url", "data_url": source}],
    )

    [call] = codex_bridge.backend.requests_for("images_edits")
    assert call.body["images"] == [{"image_url": source}]
    assert call.body["prompt"] == "make it red"
    assert codex_bridge.backend.calls("images_generations") == 0


async def test_generation_with_references_uses_edits_and_explains_them(
    codex_bridge: CodexBridge,
) -> None:
    reference = png_data_url(8, 8, (200, 10, 10))

    await codex_bridge.run(
        "a cat",
        routing=IMAGES,
        reference_images=[{"type": "data_url", "data_url": reference}],
    )

    [call] = codex_bridge.backend.requests_for("images_edits")
    assert call.body["images"] == [{"image_url": reference}]
    assert call.body["prompt"] == (
        "Generate an image using the 1 attached image(s) as visual references. Prompt: a cat"
    )


async def test_more_than_five_inputs_are_refused_before_any_call(
    codex_bridge: CodexBridge,
) -> None:
    image = {"type": "data_url", "data_url": png_data_url(8, 8, (9, 99, 199))}

    error = await codex_bridge.fail(
        routing=IMAGES, operation="edit", images=[image] * 3, reference_images=[image] * 3
    )

    assert error.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert error.details["supported"] == 5
    assert codex_bridge.backend.requests == []


async def test_the_produced_size_is_reported_and_normalized(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.honour_size = False  # the real route ignores `size`

    response = await codex_bridge.run(routing=IMAGES, parameters={"size": "1536x1024"})

    [call] = codex_bridge.backend.requests_for("images_generations")
    assert call.body["size"] == "1536x1024"
    assert call.body["prompt"] == "a red fox\n\nAspect ratio: 3:2."
    assert (response.data[0].width, response.data[0].height) == (64, 64)
    assert response.effective.size == "64x64"
    assert "provider_output_dimensions_differed" in response.warnings
    [change] = [n for n in response.normalizations if n.field == "parameters.size"]
    assert (change.requested, change.effective) == ("1536x1024", "64x64")


async def test_aspect_ratio_is_written_into_the_prompt(codex_bridge: CodexBridge) -> None:
    await codex_bridge.run("dunes", routing=IMAGES, parameters={"aspect_ratio": "21:9"})

    [call] = codex_bridge.backend.requests_for("images_generations")
    assert call.body["prompt"] == "dunes\n\nAspect ratio: 7:3."
    assert call.body["size"] == "auto"


async def test_capabilities_advertise_only_what_the_route_honours(
    codex_bridge: CodexBridge,
) -> None:
    caps = await codex_bridge.runtime.registry.capabilities("codex-images", None)

    assert caps.model == "gpt-image-2"
    assert [q.value for q in caps.qualities] == ["auto"]
    assert [f.value for f in caps.output_formats] == ["png"]
    assert [m.value for m in caps.moderation] == ["auto"]
    assert [b.value for b in caps.backgrounds] == ["auto", "opaque", "transparent"]
    assert caps.transparent_background.value == "native"
    assert caps.resolution.value == "unsupported"
    assert (caps.partial_images.min, caps.partial_images.max) == (0, 0)
    assert caps.batching.mode.value == "fan_out"
    assert caps.experimental is True


async def test_strict_requests_for_unhonoured_parameters_are_refused(
    codex_bridge: CodexBridge,
) -> None:
    error = await codex_bridge.fail(routing=IMAGES, parameters={"quality": "high"})

    assert error.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert codex_bridge.backend.requests == []


async def test_n3_fans_out_to_three_calls(codex_bridge: CodexBridge) -> None:
    response = await codex_bridge.run(routing=IMAGES, parameters={"n": 3})

    assert len(response.data) == 3
    assert codex_bridge.backend.calls("images_generations") == 3


async def test_a_transient_5xx_is_retried_once(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.script("http_502", route="images_generations")

    response = await codex_bridge.run(routing=IMAGES)

    assert codex_bridge.backend.calls("images_generations") == 2
    assert "transient_provider_retry_used" in response.warnings


async def test_quota_429_is_not_retried_and_not_counted_by_the_breaker(
    codex_bridge: CodexBridge,
) -> None:
    codex_bridge.backend.script("http_429", route="images_generations")

    error = await codex_bridge.fail(routing=IMAGES)

    assert error.code is ErrorCode.RATE_LIMITED and error.details["quota_exhausted"] is True
    assert codex_bridge.backend.calls("images_generations") == 1
    assert codex_bridge.runtime.breaker_snapshot()["codex-images"]["consecutive_failures"] == 0


async def test_quota_headers_update_the_snapshot(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.quota.secondary_used_percent = 77.5

    await codex_bridge.run(routing=IMAGES)
    diagnostics = await codex_bridge.provider("codex-images").diagnostics()

    windows = {w["name"]: w for w in diagnostics["quota"]["windows"]}
    assert diagnostics["quota"]["source"] == "headers"
    assert windows["secondary"]["used_percent"] == 77.5
    assert codex_bridge.backend.calls("usage") == 0
    assert BRIDGE_TOKEN not in json.dumps(diagnostics)


def test_usage_url_is_derived_from_the_base_url() -> None:
    assert images_usage_url("https://chatgpt.com/backend-api/codex") == (
        "https://chatgpt.com/backend-api/wham/usage"
    )
    assert images_usage_url("http://127.0.0.1:9/api/codex/") == "http://127.0.0.1:9/api/wham/usage"


# -- the route follows the prompt, not `size` ------------------------------------------------


def like_the_real_route(bridge: CodexBridge) -> CodexBackend:
    """The mock ignores ``size`` and draws the canvas the prompt's aspect line asks for."""
    backend = bridge.backend
    backend.honour_size, backend.canvas_from_prompt = False, True
    return backend


async def test_a_square_size_gets_the_routes_own_square_and_says_so(
    codex_bridge: CodexBridge,
) -> None:
    backend = like_the_real_route(codex_bridge)

    response = await codex_bridge.run(routing=IMAGES, parameters={"size": "1024x1024"})

    [call] = backend.requests_for("images_generations")
    assert call.body["prompt"].endswith("Aspect ratio: 1:1.")
    assert (response.data[0].width, response.data[0].height) == (1254, 1254)
    [change] = [n for n in response.normalizations if n.field == "parameters.size"]
    assert (change.requested, change.effective) == ("1024x1024", "1254x1254")
    assert change.reason == "provider_output_dimensions_differed"


async def test_an_aspect_ratio_the_route_followed_is_not_a_normalization(
    codex_bridge: CodexBridge,
) -> None:
    like_the_real_route(codex_bridge)

    response = await codex_bridge.run(routing=IMAGES, parameters={"aspect_ratio": "16:9"})

    assert (response.data[0].width, response.data[0].height) == (1672, 941)
    assert not [n for n in response.normalizations if n.field == "parameters.aspect_ratio"]
    assert "provider_output_dimensions_differed" not in response.warnings


async def test_an_aspect_ratio_the_route_missed_is_reported_never_silently(
    codex_bridge: CodexBridge,
) -> None:
    codex_bridge.backend.honour_size = False  # a square, whatever the prompt says

    response = await codex_bridge.run(routing=IMAGES, parameters={"aspect_ratio": "16:9", "n": 2})

    changes = [n for n in response.normalizations if n.field == "parameters.aspect_ratio"]
    assert [(n.requested, n.effective) for n in changes] == [("16:9", "1:1")]
    assert "provider_output_dimensions_differed" in response.warnings
