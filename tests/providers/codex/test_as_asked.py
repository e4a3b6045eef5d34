"""Issue 32 against the Codex backend mock: masks composited by the bridge, honest sizes,
the ``size_mismatch`` policy and ``routing.prefer: honour_size``.

The mock ignores masks (it never reads one) and, here, answers every call with its own
canvas size, as the real subscription backend does.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from imagebridge.contract.errors import ErrorCode
from tests.support.codex_backend import CodexBridge
from tests.support.images import encoded_png

SOURCE_SIZE = (96, 64)
MASK_BOX = (30, 20, 70, 50)  # x0, y0, x1, y1 (exclusive): the area to change
FEATHER = 8


def _png(image: Image.Image) -> str:
    return base64.b64encode(encoded_png(image)).decode("ascii")


def source_pixels() -> np.ndarray[Any, np.dtype[np.uint8]]:
    """A busy, deterministic picture: every pixel differs from its neighbours."""
    width, height = SOURCE_SIZE
    ys, xs = np.mgrid[0:height, 0:width]
    return np.stack([(xs * 7) % 256, (ys * 11) % 256, ((xs + ys) * 5) % 256], axis=-1).astype(
        np.uint8
    )


def mask_image(*, alpha: bool = True, size: tuple[int, int] = SOURCE_SIZE) -> Image.Image:
    if not alpha:
        return Image.new("RGB", size, (255, 255, 255))
    plane = np.full((size[1], size[0]), 255, dtype=np.uint8)
    x0, y0, x1, y1 = MASK_BOX
    plane[y0:y1, x0:x1] = 0
    rgba = np.zeros((size[1], size[0], 4), dtype=np.uint8)
    rgba[..., 3] = plane
    return Image.fromarray(rgba, "RGBA")


def edit_fields(mask: Image.Image, **extra: Any) -> dict[str, Any]:
    return {
        "operation": "edit",
        "images": [{"type": "base64", "data": _png(Image.fromarray(source_pixels(), "RGB"))}],
        "mask": {"type": "base64", "data": _png(mask)},
        "routing": {"provider": "codex-responses"},
        **extra,
    }


def decoded(response: Any, index: int = 0) -> np.ndarray[Any, np.dtype[np.uint8]]:
    data = base64.b64decode(response.data[index].b64_json)
    with Image.open(io.BytesIO(data)) as image:
        return np.array(image.convert("RGB"))


NORMALIZE = {"compatibility": "normalize"}


# -- masks ------------------------------------------------------------------------------------


async def test_an_emulated_mask_keeps_the_source_outside_and_changes_the_inside(
    codex_bridge: CodexBridge,
) -> None:
    backend = codex_bridge.backend
    backend.honour_size = False
    backend.image_size = (1254, 1254)
    response = await codex_bridge.run(
        "paint a red door", **edit_fields(mask_image(), policies=NORMALIZE)
    )

    pixels, source = decoded(response), source_pixels()
    assert pixels.shape[:2] == (SOURCE_SIZE[1], SOURCE_SIZE[0])  # the source's size
    x0, y0, x1, y1 = MASK_BOX
    outside = np.ones(pixels.shape[:2], dtype=bool)
    outside[y0:y1, x0:x1] = False
    # the feather band lies inside the area, so every pixel outside it is the source's
    assert np.array_equal(pixels[outside], source[outside])
    inner = (slice(y0 + FEATHER, y1 - FEATHER), slice(x0 + FEATHER, x1 - FEATHER))
    changed = np.any(pixels[inner] != source[inner], axis=-1)
    assert changed.mean() > 0.95

    assert "mask_emulated" in response.warnings
    reasons = {n.field: n for n in response.normalizations}
    assert (reasons["mask"].requested, reasons["mask"].effective) == ("native", "emulated")
    composite = reasons["data[0].mask"].effective
    assert composite["generated_size"] == "1254x1254" and composite["resampled"] is True
    assert composite["region"] == list(MASK_BOX) and composite["feather_px"] == FEATHER
    [sent] = backend.requests_for("responses")
    body = json.dumps(sent.body)
    assert "mask" not in body.lower().replace("masks", "")
    assert "Change only the area" in body


async def test_strict_compatibility_still_refuses_a_mask(codex_bridge: CodexBridge) -> None:
    error = await codex_bridge.fail("x", **edit_fields(mask_image()))
    assert error.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert error.details["field"] == "mask"
    assert error.details["codex_code"] == "CODEX_RASTER_MASK_UNSUPPORTED"
    assert codex_bridge.backend.call_counts["responses"] == 0


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (mask_image(size=(48, 32)), "same dimensions"),
        (mask_image(alpha=False), "alpha channel"),
    ],
)
async def test_a_mask_that_cannot_mark_the_image_is_refused_before_any_call(
    codex_bridge: CodexBridge, mask: Image.Image, message: str
) -> None:
    error = await codex_bridge.fail("x", **edit_fields(mask, policies=NORMALIZE))
    assert error.code is ErrorCode.INPUT and error.http_status == 400
    assert error.details["field"] == "mask" and message in error.message
    assert codex_bridge.backend.call_counts["responses"] == 0


# -- honest sizes ------------------------------------------------------------------------------

LARGE = {"size": "2048x2048"}


async def test_a_2048_request_answered_1254_says_so(codex_bridge: CodexBridge) -> None:
    backend = codex_bridge.backend
    backend.honour_size = False
    backend.image_size = (1254, 1254)
    response = await codex_bridge.run(parameters=LARGE)
    assert (response.data[0].width, response.data[0].height) == (1254, 1254)
    changes = [(n.field, n.requested, n.effective) for n in response.normalizations]
    assert ("parameters.size", "2048x2048", "1254x1254") in changes
    assert "provider_output_size_differed" in response.warnings
    assert "provider_output_dimensions_differed" in response.warnings  # the original's code


async def test_a_size_normalized_away_is_still_compared_with_the_ask(
    codex_bridge: CodexBridge,
) -> None:
    """codex-images takes no 2048 size: negotiation sends ``auto``, the answer is compared
    with the caller's 2048×2048 all the same."""
    codex_bridge.backend.image_size = (1254, 1254)
    response = await codex_bridge.run(
        parameters=LARGE, routing={"provider": "codex-images"}, policies=NORMALIZE
    )
    found = [
        (n.requested, n.effective)
        for n in response.normalizations
        if n.reason == "provider_output_size_differed"
    ]
    assert found == [("2048x2048", "1254x1254")]
    assert response.warnings.count("provider_output_size_differed") == 1


async def test_size_mismatch_fail_is_an_error_after_exactly_one_call(
    codex_bridge: CodexBridge,
) -> None:
    backend = codex_bridge.backend
    backend.honour_size = False
    backend.image_size = (1254, 1254)
    error = await codex_bridge.fail(
        parameters=LARGE,
        policies={"size_mismatch": "fail"},
        routing={"fallbacks": [{"provider": "codex-images"}], "fallback_policy": "on_error"},
    )
    assert error.code is ErrorCode.UNSUPPORTED_CAPABILITY and not error.retryable
    assert error.details["billed"] is True and error.details["delivered"] == ["1254x1254"]
    assert backend.call_counts["responses"] == 1
    assert backend.call_counts["images_generations"] == 0  # a billed call never falls back


async def test_a_matching_size_passes_the_fail_policy(codex_bridge: CodexBridge) -> None:
    response = await codex_bridge.run(
        parameters={"size": "1024x1024"}, policies={"size_mismatch": "fail"}
    )
    assert (response.data[0].width, response.data[0].height) == (1024, 1024)
    assert "provider_output_size_differed" not in response.warnings


# -- the transport that honours the request -----------------------------------------------------


async def test_honour_size_routes_a_2k_request_to_the_transport_that_delivers_it(
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
) -> None:
    bridge = await codex_bridge_factory('default_provider="codex-images"')
    backend = bridge.backend
    backend.image_size = (1254, 1254)
    backend.ignore_size_on = {"images_generations"}
    await bridge.run(parameters=LARGE, policies=NORMALIZE)  # the default: codex-images
    await bridge.run(parameters=LARGE, routing={"provider": "codex-responses"})
    assert backend.call_counts["images_generations"] == 1
    assert backend.call_counts["responses"] == 1

    preferred = await bridge.run(parameters=LARGE, routing={"prefer": "honour_size"})
    assert preferred.provider == "codex-responses"
    assert (preferred.data[0].width, preferred.data[0].height) == (2048, 2048)
    plain = await bridge.run(parameters=LARGE, policies=NORMALIZE)
    assert plain.provider == "codex-images"  # without the preference, the default
    small = await bridge.run(parameters={"size": "1024x1024"}, routing={"prefer": "honour_size"})
    assert small.provider == "codex-images"  # 1536 px and below are not re-routed

    from imagebridge.server import create_app

    server = create_app(bridge.app.config, application=bridge.app)
    transport = httpx.ASGITransport(app=server)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        extended = (await client.get("/v1/diagnostics/extended")).json()
        base = (await client.get("/v1/diagnostics")).json()
    rates = extended["runtime"]["size_match"]
    assert rates["codex-images"]["gpt-image-2"]["2k"] == {"calls": 2, "matched": 0, "rate": 0.0}
    assert rates["codex-responses"]["gpt-image-2"]["2k"] == {"calls": 2, "matched": 2, "rate": 1.0}
    assert "size_match" not in base["runtime"]  # the original's strict document is unchanged


async def test_the_config_default_prefers_the_honouring_transport(
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
) -> None:
    bridge = await codex_bridge_factory(
        'default_provider="codex-images"', 'runtime.images.prefer="honour_size"'
    )
    backend = bridge.backend
    backend.image_size = (1254, 1254)
    backend.ignore_size_on = {"images_generations"}
    first = await bridge.run(parameters=LARGE, policies=NORMALIZE)
    assert first.provider == "codex-images"  # nothing measured yet: the default
    await bridge.run(parameters=LARGE, routing={"provider": "codex-responses"})
    assert (await bridge.run(parameters=LARGE)).provider == "codex-responses"


# -- format and quality -----------------------------------------------------------------------


async def test_a_png_answer_to_a_jpeg_request_is_delivered_as_jpeg_and_said(
    codex_bridge: CodexBridge,
) -> None:
    """The backend answers PNG whatever it is sent (the mock too, by default): the original
    refused that with a 502 after the billed call."""
    response = await codex_bridge.run(parameters={"output_format": "jpeg"})
    [item] = response.data
    assert item.format.value == "jpeg"
    assert base64.b64decode(item.b64_json or "")[:3] == b"\xff\xd8\xff"
    notes = [n for n in response.normalizations if n.field == "data[0].format"]
    assert [n.effective for n in notes] == [{"provider": "png", "delivered": "jpeg"}]
    assert "provider_output_format_differed" in response.warnings
    assert codex_bridge.backend.call_counts["responses"] == 1


async def test_a_preferred_transport_keeps_the_fallbacks_and_ends_with_the_default(
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
) -> None:
    bridge = await codex_bridge_factory('default_provider="codex-images"')
    backend = bridge.backend
    backend.image_size = (1254, 1254)
    backend.ignore_size_on = {"images_generations"}
    await bridge.run(parameters=LARGE, routing={"provider": "codex-responses"})
    named = await bridge.run(
        parameters=LARGE,
        policies=NORMALIZE,
        routing={"prefer": "honour_size", "fallbacks": [{"provider": "codex-responses"}]},
    )
    assert named.provider == "codex-responses"  # the fallback naming it is not a duplicate
    backend.script("http_401")  # the preferred transport is refused at the door
    fell_back = await bridge.run(
        parameters=LARGE, policies=NORMALIZE, routing={"prefer": "honour_size"}
    )
    assert fell_back.provider == "codex-images"
    assert "provider_fallback_used" in fell_back.warnings


async def test_every_codex_document_says_emulated_in_the_original_schema(
    codex_bridge: CodexBridge,
) -> None:
    from imagebridge.providers.codex_app_server.capabilities import app_server_capabilities
    from tests.compat import original_contract

    documents = [
        await codex_bridge.provider("codex-responses").capabilities(None),
        await codex_bridge.provider("codex-images").capabilities(None),
        app_server_capabilities("gpt-image-2"),
    ]
    for caps in documents:
        wire = caps.to_wire()
        original_contract.validate(wire, "ProviderCapabilities")  # strict clients decode it
        assert wire["masks"]["support"] == "emulated" and wire["masks"]["max_count"] == 1
