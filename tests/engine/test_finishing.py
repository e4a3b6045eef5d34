"""Finishing: what the transport's encoder did, chroma key or native alpha, dimensions."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.engine.materialize import Materializer
from imagebridge.engine.transparency import ChromaPlan
from imagebridge.imaging.inspect import inspect_image
from tests.engine.outputs import keyed_fixture, request, response, rgba_png
from tests.support.fakes import image_item
from tests.support.images import encoded_png, png_bytes

# -- the transport's encoder -------------------------------------------------------------------


async def test_another_format_than_negotiated_is_reencoded_and_reported() -> None:
    """Issue 32: the original refused it (a protocol error after a billed call); the
    bridge now delivers the format asked for and says the transport made another."""
    result = await Materializer().materialize(
        response([image_item(0, png_bytes(4, 3))]),
        request(parameters={"output_format": "webp"}),
        None,
        owner="o",
    )
    [item] = result.data
    assert item.format.value == "webp" and (item.width, item.height) == (4, 3)
    assert inspect_image(base64.b64decode(item.b64_json or "")).format.value == "webp"
    [note] = result.normalizations
    assert (note.field, note.requested, note.effective, note.reason) == (
        "data[0].format",
        "webp",
        {"provider": "png", "delivered": "webp"},
        "provider_output_format_reencoded",
    )
    assert result.warnings == ["provider_output_format_differed"]


def jpeg_bytes(quality: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (30, 140, 220)).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


async def test_a_jpeg_quality_other_than_asked_is_reported() -> None:
    eff = request(parameters={"output_format": "jpeg", "output_compression": 90})
    result = await Materializer().materialize(
        response([image_item(0, jpeg_bytes(60), "jpeg")]), eff, None, owner="o"
    )
    [note] = result.normalizations
    assert (note.field, note.requested, note.effective, note.reason) == (
        "data[0].output_compression",
        90,
        60,
        "provider_output_quality_differed",
    )
    assert result.warnings == ["provider_output_quality_differed"]
    honoured = await Materializer().materialize(
        response([image_item(0, jpeg_bytes(90), "jpeg")]), eff, None, owner="o"
    )
    assert honoured.normalizations == [] and honoured.warnings == []


async def test_see_through_pixels_in_an_image_asked_opaque_are_reported() -> None:
    rgba = np.zeros((4, 4, 4), dtype=np.uint8)
    rgba[..., 3] = 255
    rgba[0, :2, 3] = 0  # two see-through pixels
    eff = request(parameters={"background": "opaque"})
    result = await Materializer().materialize(
        response([image_item(0, encoded_png(Image.fromarray(rgba, "RGBA")))]), eff, None, owner="o"
    )
    [note] = result.normalizations
    assert (note.field, note.requested, note.effective, note.reason) == (
        "data[0].background",
        "opaque",
        {"see_through_pixels": 2},
        "provider_output_background_differed",
    )
    assert result.warnings == ["provider_output_background_differed"]
    rgba[..., 3] = 255
    clean = await Materializer().materialize(
        response([image_item(0, encoded_png(Image.fromarray(rgba, "RGBA")))]), eff, None, owner="o"
    )
    assert clean.normalizations == [] and clean.warnings == []


# -- transparency: chroma key or native alpha --------------------------------------------------


async def test_the_chroma_key_is_sampled_from_the_actual_border() -> None:
    plan = ChromaPlan("#ff00ff", 12, 96, True)  # planned magenta, the provider painted green
    result = await Materializer().materialize(
        response([image_item(0, keyed_fixture())]), request(), plan, owner="o"
    )
    [key] = [n for n in result.normalizations if n.field == "data[0].transparency.key_color"]
    assert (key.requested, key.effective, key.reason) == (
        "#ff00ff",
        "#00ff00",
        "sampled_provider_output_border",
    )
    [alpha] = [n for n in result.normalizations if n.field == "data[0].transparency.alpha"]
    assert alpha.requested is None
    assert alpha.effective == {
        "total_pixels": 400,
        "transparent_pixels": 300,
        "partial_pixels": 0,
        "opaque_pixels": 100,
        "transparent_corners": 4,
    }


async def test_a_chroma_failure_is_an_artifact_error_naming_the_stage() -> None:
    plan = ChromaPlan("#00ff00", 12, 96, True)
    white = png_bytes(20, 20, color=(255, 255, 255))
    with pytest.raises(BridgeError) as caught:
        await Materializer().materialize(
            response([image_item(0, white)]), request(), plan, owner="o"
        )
    error = caught.value
    assert (error.code, error.message) == (
        ErrorCode.ARTIFACT,
        "provider output image failed independent verification",
    )
    assert error.details["stage"] == "transparent_background"


async def test_native_transparency_is_validated_without_the_corner_rule() -> None:
    eff = request(parameters={"background": "transparent"})
    result = await Materializer().materialize(
        response([image_item(0, rgba_png())]), eff, None, owner="o"
    )
    [alpha] = result.normalizations
    assert (alpha.field, alpha.reason) == ("data[0].transparency.alpha", "validated_native_alpha")
    assert alpha.effective["transparent_pixels"] == 300  # type: ignore[index]
    with pytest.raises(BridgeError) as caught:  # a provider that ignored transparency
        await Materializer().materialize(
            response([image_item(0, rgba_png(transparent_border=False))]), eff, None, owner="o"
        )
    assert caught.value.code is ErrorCode.ARTIFACT
    assert caught.value.details["stage"] == "transparent_background"


# -- dimensions --------------------------------------------------------------------------------


async def test_mixed_dimensions_are_reported_per_image() -> None:
    items = [image_item(0, png_bytes(2, 2)), image_item(1, png_bytes(1, 1))]
    eff = request(parameters={"n": 2, "size": "2x2"})
    result = await Materializer().materialize(response(items), eff, None, owner="o")
    assert [(n.field, n.effective) for n in result.normalizations] == [("data[1].size", "1x1")]
    # the original's warning, kept for its clients, and the issue-32 one for the same fact
    assert result.warnings == [
        "provider_output_dimensions_differed",
        "provider_output_size_differed",
    ]


async def test_uniformly_different_dimensions_change_the_effective_size() -> None:
    items = [image_item(0, png_bytes(3, 2)), image_item(1, png_bytes(3, 2))]
    eff = request(parameters={"n": 2, "size": "2x2"}, policies={"compatibility": "strict"})
    resp = response(items)
    result = await Materializer().materialize(resp, eff, None, owner="o")
    assert result.effective.size == "3x2"
    [change] = result.normalizations
    assert (change.field, change.requested, change.effective, change.reason) == (
        "parameters.size",
        "2x2",
        "3x2",
        "provider_output_dimensions_differed",
    )
    # the original's warning, kept for its clients, and the issue-32 one for the same fact
    assert result.warnings == [
        "provider_output_dimensions_differed",
        "provider_output_size_differed",
    ]
    same = await Materializer().materialize(
        response([image_item(0, png_bytes(2, 2))]),
        request(parameters={"size": "2x2"}),
        None,
        owner="o",
    )
    assert same.normalizations == [] and same.warnings == []
