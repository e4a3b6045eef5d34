"""Inspection in order: size, sniff, header limits, full decode, checksum, alpha."""

from __future__ import annotations

import hashlib
import warnings

import pytest
from PIL import Image, PngImagePlugin

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import (
    ImageLimits,
    ainspect_image,
    examine_image,
    inspect_image,
    sniff_format,
)
from tests.artifacts.images import encode, jpeg, png, png_bomb, webp
from tests.imaging.inspection import input_error


def test_validates_complete_png_and_checksum() -> None:
    data = png(3, 2)
    info = inspect_image(data)
    assert info.format is OutputFormat.PNG
    assert (info.width, info.height) == (3, 2)
    assert info.bytes == len(data)
    assert info.sha256 == hashlib.sha256(data).hexdigest()
    assert info.has_alpha is True
    assert info.to_dict() == {
        "format": "png",
        "width": 3,
        "height": 2,
        "bytes": len(data),
        "sha256": info.sha256,
    }


@pytest.mark.parametrize(
    ("data", "fmt", "alpha"),
    [
        (jpeg(5, 4), OutputFormat.JPEG, False),
        (webp(5, 4), OutputFormat.WEBP, True),
        (webp(5, 4, lossless=False, alpha=False), OutputFormat.WEBP, False),
    ],
)
def test_inspects_jpeg_and_webp(data: bytes, fmt: OutputFormat, alpha: bool) -> None:
    info = inspect_image(data)
    assert (info.format, info.width, info.height, info.has_alpha) == (fmt, 5, 4, alpha)
    assert info.media_type == fmt.media_type


def test_sniffs_only_magic_bytes() -> None:
    assert sniff_format(png(1, 1)) is OutputFormat.PNG
    assert sniff_format(jpeg(1, 1)) is OutputFormat.JPEG
    assert sniff_format(webp(1, 1)) is OutputFormat.WEBP
    assert sniff_format(b"GIF89a....") is None
    assert sniff_format(b"") is None


def test_rejects_truncated_jpeg() -> None:
    data = encode(Image.effect_noise((64, 64), 50).convert("RGB"), "JPEG")
    error = input_error(data[: len(data) // 2])
    assert error.message == "image payload is malformed or incomplete"


def test_enforces_dimension_limits_before_publish() -> None:
    error = input_error(png(3, 2), ImageLimits(max_edge=2))
    assert error.message == "image dimensions exceed configured limits"
    assert input_error(png(3, 3), ImageLimits(max_pixels=8)).details["max_pixels"] == 8
    # RGBA needs 4 bytes per pixel: 3×3 → 36 bytes.
    error = input_error(png(3, 3), ImageLimits(max_decode_alloc=35))
    assert error.message == "image dimensions exceed configured limits"
    assert inspect_image(png(3, 3), ImageLimits(max_decode_alloc=36)).width == 3


def test_decompression_bomb_is_refused_before_any_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = png_bomb(10_000, 10_000)
    assert len(bomb) < 64 * 1024  # tiny encoded, 100 Mpx decoded
    # Pillow's own guard is switched off: our limits alone must refuse it, before load().
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)

    def forbidden_load(self: object) -> None:
        raise AssertionError("the bomb reached the decoder")

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load", forbidden_load)
    error = input_error(bomb)
    assert error.message == "image dimensions exceed configured limits"
    assert (error.details["width"], error.details["height"]) == (10_000, 10_000)


def test_pillow_global_pixel_limit_is_not_our_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert inspect_image(png(100, 100)).width == 100
        assert inspect_image(jpeg(100, 100)).width == 100


def test_other_formats_are_not_enabled() -> None:
    gif = encode(Image.new("RGB", (2, 2)), "GIF")
    bmp = encode(Image.new("RGB", (2, 2)), "BMP")
    for data, name in ((gif, "gif"), (bmp, "bmp")):
        error = input_error(data)
        assert error.message == "input image format is not enabled"
        assert error.details["detected_format"] == name


@pytest.mark.parametrize("data", [b"", b"hello world, not an image", b"\x89PNG"])
def test_unknown_or_empty_input_is_refused(data: bytes) -> None:
    assert input_error(data).code is ErrorCode.INPUT


def test_oversized_encoded_input_is_refused() -> None:
    data = png(3, 2)
    error = input_error(data, ImageLimits(max_encoded_bytes=len(data) - 1))
    assert error.message == "encoded image exceeds the configured size limit"


async def test_async_wrapper_matches_sync() -> None:
    data = png(40, 20)
    assert await ainspect_image(data) == inspect_image(data)


@pytest.mark.parametrize("data", [png(40, 30), jpeg(40, 30), webp(40, 30)])
def test_examine_image_reports_what_a_full_inspection_proves(data: bytes) -> None:
    for max_decoded_pixels in (0, 40 * 30):
        info, verified = examine_image(data, ImageLimits(), max_decoded_pixels=max_decoded_pixels)
        assert info == inspect_image(data)
        # A PNG's pixels are checked without a pixel buffer, so always; the others only
        # when their pixel buffer is allowed.
        assert verified is (max_decoded_pixels > 0 or data.startswith(b"\x89PNG"))


def test_examine_image_refuses_what_the_container_alone_shows() -> None:
    whole = png(40, 30)
    for bad in (b"hello", whole[:-20], png_bomb()):
        with pytest.raises(BridgeError) as caught:
            examine_image(bad, ImageLimits(max_pixels=1_000_000), max_decoded_pixels=0)
        assert caught.value.code is ErrorCode.INPUT


def test_examine_image_leaves_a_large_pixel_decode_to_inspect_image() -> None:
    # Framing and CRCs intact, pixel stream garbage: only a full decode can tell. With no
    # pixel buffer allowed, it is not decided here (not verified, not refused).
    whole = jpeg(40, 30)
    broken = whole[: len(whole) // 2] + bytes(len(whole) // 2 - 2) + b"\xff\xd9"
    info, verified = examine_image(broken, ImageLimits(), max_decoded_pixels=0)
    assert (info.width, verified) == (40, False)
    with pytest.raises(BridgeError, match="malformed or incomplete"):
        inspect_image(broken)
    with pytest.raises(BridgeError, match="malformed or incomplete"):
        examine_image(broken, ImageLimits(), max_decoded_pixels=40 * 30)
