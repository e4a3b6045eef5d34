"""Whole images: the spec's fixtures, the matte's refusals, border sampling, re-encoding."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError
from imagebridge.imaging.chroma.alpha import AlphaSummary
from imagebridge.imaging.chroma.images import (
    adetect_border_key,
    ainspect_transparent_alpha,
    aremove_background,
    aremove_chroma_key,
    detect_border_key,
    inspect_transparent_alpha,
    remove_background,
    remove_chroma_key,
)
from imagebridge.imaging.chroma.keys import ChromaKey, ChromaOptions
from imagebridge.imaging.inspect import inspect_image
from tests.artifacts.images import decode_rgba, encode, keyed_fixture
from tests.imaging.chroma.support import GREEN, chroma_error, reference


def test_removes_key_preserves_subject_and_normalizes_transparent_rgb() -> None:
    result = remove_chroma_key(keyed_fixture(), OutputFormat.PNG, ChromaOptions())
    assert result.alpha == AlphaSummary(400, 300, 0, 100, 4)
    decoded = decode_rgba(result.data)
    assert decoded[0, 0].tolist() == [0, 0, 0, 0]
    assert decoded[10, 10].tolist() == [220, 30, 20, 255]
    assert result.info == inspect_image(result.data)
    assert result.info.has_alpha


def test_rejects_invalid_thresholds_and_non_keyed_outputs() -> None:
    error = chroma_error(
        lambda: remove_chroma_key(
            keyed_fixture(), "png", ChromaOptions(transparent_threshold=96, opaque_threshold=12)
        )
    )
    assert error.message == "transparent threshold must be lower than opaque threshold"
    white = encode(Image.new("RGB", (20, 20), (255, 255, 255)), "PNG")
    error = chroma_error(lambda: remove_chroma_key(white, "png"))
    assert error.message == "background removal produced no meaningful transparent region"
    assert error.details["transparent_pixels"] == 0
    assert error.details["total_pixels"] == 400


def test_refuses_a_matte_that_erases_the_subject() -> None:
    green = encode(Image.new("RGB", (20, 20), (0, 255, 0)), "PNG")
    error = chroma_error(lambda: remove_chroma_key(green, "png"))
    assert error.message == "background removal erased the entire visible subject"


def test_refuses_an_opaque_border_but_native_alpha_skips_the_corner_rule() -> None:
    pixels = np.zeros((20, 20, 4), dtype=np.uint8)
    pixels[...] = (200, 40, 40, 255)
    pixels[5:15, 5:15] = (0, 255, 0, 255)
    data = encode(Image.fromarray(pixels), "PNG")
    error = chroma_error(lambda: remove_chroma_key(data, "png"))
    assert error.details["transparent_corners"] == 0
    native = pixels.copy()
    native[5:15, 5:15, 3] = 0
    summary = inspect_transparent_alpha(encode(Image.fromarray(native), "PNG"))
    assert (summary.transparent_pixels, summary.transparent_corners) == (100, 0)
    opaque = encode(Image.new("RGB", (20, 20), (1, 2, 3)), "PNG")
    assert (
        chroma_error(lambda: inspect_transparent_alpha(opaque)).details["transparent_pixels"] == 0
    )


def test_output_must_be_png_or_webp() -> None:
    error = chroma_error(lambda: remove_chroma_key(keyed_fixture(), OutputFormat.JPEG))
    assert error.message == "transparent output requires PNG or WebP encoding"


def test_webp_output_is_lossless() -> None:
    as_png = remove_chroma_key(keyed_fixture(), "png")
    as_webp = remove_chroma_key(keyed_fixture(), "webp")
    assert as_webp.info.format is OutputFormat.WEBP
    assert np.array_equal(decode_rgba(as_webp.data), decode_rgba(as_png.data))


def test_despill_pulls_key_colour_out_of_partial_edges() -> None:
    pixels = np.zeros((20, 20, 4), dtype=np.uint8)
    pixels[...] = (0, 255, 0, 255)
    pixels[5:15, 5:15] = (220, 30, 20, 255)
    pixels[5:15, 4] = (110, 180, 40, 255)  # an antialiased green-tinted edge
    data = encode(Image.fromarray(pixels), "PNG")
    with_despill = decode_rgba(remove_chroma_key(data, "png").data)[10, 4]
    without = decode_rgba(remove_chroma_key(data, "png", ChromaOptions(despill=False)).data)[10, 4]
    assert 0 < with_despill[3] < 255
    assert with_despill[1] <= with_despill[0] - 1 < without[1]
    expected = reference(pixels[10:11, 4:5], ChromaOptions())[0, 0]
    assert with_despill.tolist() == expected.tolist()


def test_detects_the_painted_border_colour() -> None:
    pixels = np.zeros((30, 40, 4), dtype=np.uint8)
    pixels[...] = (4, 250, 9, 255)
    pixels[10:20, 10:30] = (200, 10, 10, 255)
    assert detect_border_key(encode(Image.fromarray(pixels), "PNG")) == ChromaKey(4, 250, 9)


def test_remove_background_auto_uses_the_border_and_explicit_keys_are_honoured() -> None:
    pixels = np.zeros((20, 20, 4), dtype=np.uint8)
    pixels[...] = (250, 5, 250, 255)
    pixels[5:15, 5:15] = (20, 200, 40, 255)
    data = encode(Image.fromarray(pixels), "PNG")
    auto = remove_background(data)
    assert auto.key == ChromaKey(250, 5, 250)
    assert (auto.alpha.transparent_pixels, auto.alpha.opaque_pixels) == (300, 100)
    explicit = remove_background(data, key="#fa05fa", output_format="webp")
    assert explicit.key == ChromaKey(250, 5, 250)
    assert explicit.info.format is OutputFormat.WEBP
    with pytest.raises(BridgeError):
        remove_background(data, key="#00ff00")  # wrong key: nothing transparent


async def test_async_wrappers_run_the_same_work() -> None:
    fixture = keyed_fixture()
    assert (await aremove_chroma_key(fixture, "png")).alpha.transparent_pixels == 300
    assert (await aremove_background(fixture)).key == GREEN
    assert await adetect_border_key(fixture) == GREEN
    result = remove_chroma_key(fixture, "png")
    assert (await ainspect_transparent_alpha(result.data)).transparent_pixels == 300
