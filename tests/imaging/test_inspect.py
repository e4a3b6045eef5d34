from __future__ import annotations

import hashlib
import io
import random
import struct
import warnings
import zlib
from typing import Any

import pytest
from PIL import Image, PngImagePlugin

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import (
    ImageLimits,
    ainspect_image,
    amake_thumbnail,
    decode_verified,
    examine_image,
    inspect_image,
    make_thumbnail,
    sniff_format,
)
from tests.artifacts.images import encode, jpeg, noise, png, png_bomb, png_chunk, webp


def input_error(data: bytes, limits: ImageLimits | None = None) -> BridgeError:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no Pillow warning may escape
        with pytest.raises(BridgeError) as caught:
            inspect_image(data, limits)
    assert caught.value.code is ErrorCode.INPUT
    return caught.value


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


@pytest.mark.parametrize("cut", [1, 8, 12, 20, 30])
def test_rejects_truncated_png_after_header_probe(cut: int) -> None:
    # Pillow alone decodes a PNG whose IEND chunk is missing; we must not.
    error = input_error(png(3, 2)[:-cut])
    assert error.message == "image payload is malformed or incomplete"


def test_rejects_truncated_jpeg() -> None:
    data = encode(Image.effect_noise((64, 64), 50).convert("RGB"), "JPEG")
    error = input_error(data[: len(data) // 2])
    assert error.message == "image payload is malformed or incomplete"


def test_rejects_corrupted_png_chunk() -> None:
    data = bytearray(png(3, 2))
    data[-20] ^= 0xFF  # inside IDAT: CRC no longer matches
    assert input_error(bytes(data)).message == "image payload is malformed or incomplete"


@pytest.mark.parametrize("slice_bytes", [1, 7, 64, 1 << 20])
def test_chunk_crcs_are_checked_whole_whatever_the_slice(
    monkeypatch: pytest.MonkeyPatch, slice_bytes: int
) -> None:
    """A chunk's CRC-32 is computed a slice at a time (the GIL is kept meanwhile): the
    slices must add up to the chunk's CRC, so a flipped byte anywhere is still found."""
    import imagebridge.imaging.inspect as inspect_module

    monkeypatch.setattr(inspect_module, "_CRC_SLICE", slice_bytes)
    data = encode(Image.fromarray(noise(40, 30, alpha=False)), "PNG")
    assert inspect_image(data).width == 40
    for offset in (33 + 8, len(data) // 2, len(data) - 13):  # IDAT's start, middle, end
        broken = bytearray(data)
        broken[offset] ^= 0x01
        assert input_error(bytes(broken)).message == "image payload is malformed or incomplete"


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


def test_jpeg_header_dimensions_are_checked_before_decoding() -> None:
    data = bytearray(jpeg(8, 8))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = (60_000).to_bytes(2, "big") + (60_000).to_bytes(2, "big")
    error = input_error(bytes(data))
    assert error.message == "image dimensions exceed configured limits"
    assert error.details["width"] == 60_000


def test_webp_header_dimensions_are_checked_before_decoding() -> None:
    error = input_error(webp(300, 20), ImageLimits(max_edge=256))
    assert error.message == "image dimensions exceed configured limits"
    assert (error.details["width"], error.details["height"]) == (300, 20)


def test_creates_bounded_png_thumbnails_without_upscaling() -> None:
    thumbnail = make_thumbnail(png(800, 400), 128)
    info = inspect_image(thumbnail)
    assert (info.format, info.width, info.height) == (OutputFormat.PNG, 128, 64)
    small = inspect_image(make_thumbnail(png(80, 40), 128))
    assert (small.width, small.height) == (80, 40)
    from_jpeg = inspect_image(make_thumbnail(jpeg(300, 600), 64))
    assert (from_jpeg.format, from_jpeg.width, from_jpeg.height) == (OutputFormat.PNG, 32, 64)


@pytest.mark.parametrize("edge", [31, 2049, 0])
def test_thumbnail_edge_is_bounded(edge: int) -> None:
    with pytest.raises(BridgeError) as caught:
        make_thumbnail(png(10, 10), edge)
    assert caught.value.message == "thumbnail edge must be between 32 and 2048 pixels"


def test_thumbnail_handles_palette_and_sixteen_bit_sources() -> None:
    palette = encode(Image.new("P", (50, 50)), "PNG")
    sixteen = encode(Image.new("I;16", (50, 50)), "PNG")
    for source in (palette, sixteen):
        assert inspect_image(make_thumbnail(source, 32)).width == 32


async def test_async_wrappers_match_sync() -> None:
    data = png(40, 20)
    assert await ainspect_image(data) == inspect_image(data)
    assert await amake_thumbnail(data, 32) == make_thumbnail(data, 32)


def test_decoded_pixels_are_not_needed_to_read_header_of_bytes_io() -> None:
    # The header parser reads JPEG SOF after APP segments.
    image = Image.new("RGB", (7, 3))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", exif=b"Exif\x00\x00" + b"\x00" * 64)
    assert inspect_image(buffer.getvalue()).width == 7


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


# -- plain PNGs are verified by inflating every scanline, with Pillow's verdict ----------


def _raw_png(
    width: int,
    height: int,
    depth: int,
    color: int,
    stream: bytes,
    *,
    interlace: int = 0,
    before_idat: bytes = b"",
    idat_pieces: int = 1,
    between: bytes = b"",
    after_idat: bytes = b"",
) -> bytes:
    """A PNG built by hand around ``stream`` (the zlib stream of its image data)."""
    header = struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, interlace)
    palette = png_chunk(b"PLTE", bytes(range(48))) if color == 3 else b""
    step = max(1, -(-len(stream) // idat_pieces))
    pieces = [stream[i : i + step] for i in range(0, len(stream), step)] or [b""]
    idat = (between or b"").join(png_chunk(b"IDAT", piece) for piece in pieces)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + palette
        + before_idat
        + idat
        + after_idat
        + png_chunk(b"IEND", b"")
    )


def _rows(width: int, height: int, depth: int, channels: int, filters: bytes = b"\x01") -> bytes:
    stride = (width * channels * depth + 7) // 8
    rng = random.Random(width * 1000 + height)
    return b"".join(
        filters[y % len(filters) : y % len(filters) + 1] + rng.randbytes(stride)
        for y in range(height)
    )


def _pillow_verdict(data: bytes) -> str:
    """What a full Pillow decode says: the verdict ``inspect_image`` must keep."""
    try:
        _, image = decode_verified(data, ImageLimits())
    except BridgeError as error:
        return f"refused: {error.message}"
    image.close()
    return "accepted"


def _fast_verdict(data: bytes) -> str:
    try:
        inspect_image(data)
    except BridgeError as error:
        return f"refused: {error.message}"
    return "accepted"


_LAYOUTS = [  # (depth, colour type, channels)
    (1, 0, 1),
    (2, 0, 1),
    (4, 0, 1),
    (8, 0, 1),
    (16, 0, 1),
    (8, 2, 3),
    (16, 2, 3),
    (1, 3, 1),
    (4, 3, 1),
    (8, 3, 1),
    (8, 4, 2),
    (16, 4, 2),
    (8, 6, 4),
    (16, 6, 4),
]


@pytest.mark.parametrize(("depth", "color", "channels"), _LAYOUTS)
@pytest.mark.parametrize("size", [(1, 1), (7, 3), (33, 17)])
def test_plain_png_scanline_check_matches_a_full_decode(
    depth: int, color: int, channels: int, size: tuple[int, int]
) -> None:
    width, height = size
    rows = _rows(width, height, depth, channels, filters=b"\x00\x01\x02\x03\x04")
    if color == 3:  # palette indices within the 16-entry PLTE
        rows = bytes(b & 0x0F if depth == 8 else b for b in rows)
    stride = 1 + (width * channels * depth + 7) // 8
    bad_filter = bytearray(rows)
    bad_filter[stride * (height - 1)] = 5
    cases = {
        "valid": zlib.compress(rows),
        "valid, many IDAT chunks": zlib.compress(rows, 0),
        "a row short": zlib.compress(rows[:-stride]),
        "a byte short": zlib.compress(rows[:-1]),
        "a row too many": zlib.compress(rows + rows[:stride]),
        "filter type 5": zlib.compress(bytes(bad_filter)),
        "stream cut": zlib.compress(rows)[:-6],
        "bad Adler-32": zlib.compress(rows)[:-1] + b"\x00",
        "data after the stream": zlib.compress(rows) + b"\x00\x00",
        "not zlib": b"\x00" * 16,
        "empty": b"",
    }
    for name, stream in cases.items():
        for pieces in (1, 3):
            data = _raw_png(width, height, depth, color, stream, idat_pieces=pieces)
            assert _fast_verdict(data) == _pillow_verdict(data), (name, pieces)


@pytest.mark.parametrize(
    ("piece_bytes", "whole_max"), [(7, 0), (40, 0), (1 << 20, 0), (7, 8 << 20)]
)
def test_image_data_fed_in_joined_pieces_keeps_pillows_verdict(
    monkeypatch: pytest.MonkeyPatch, piece_bytes: int, whole_max: int
) -> None:
    """A small image's IDAT chunks are joined and inflated at once, a large one's are
    inflated in bounded pieces: the verdict may not depend on where the pieces start and
    end."""
    import imagebridge.imaging.inspect as inspect_module

    monkeypatch.setattr(inspect_module, "_INFLATE_INPUT", piece_bytes)
    monkeypatch.setattr(inspect_module, "_INFLATE_OUTPUT", max(piece_bytes, 64))
    monkeypatch.setattr(inspect_module, "WHOLE_INFLATE_MAX_BYTES", whole_max)
    rows = _rows(33, 17, 8, 3, filters=b"\x00\x01\x02\x03\x04")
    streams = {
        "valid": zlib.compress(rows, 0),
        "a row short": zlib.compress(rows[:-100]),
        "stream cut": zlib.compress(rows, 0)[:-6],
        "data after the stream": zlib.compress(rows) + b"\x00\x00",
        "bad Adler-32": zlib.compress(rows)[:-1] + b"\x00",
    }
    for name, stream in streams.items():
        for pieces in (1, 5, 23):
            data = _raw_png(33, 17, 8, 2, stream, idat_pieces=pieces)
            assert _fast_verdict(data) == _pillow_verdict(data), (name, pieces)

    # ... and a valid image is proven by the scanline check itself, never by Pillow's pixels
    def refuse(self: Image.Image) -> None:
        raise AssertionError("the pixels were decoded")

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load", refuse)
    for stream in (zlib.compress(rows), zlib.compress(rows, 0)):
        for pieces in (1, 5, 23):
            info = inspect_image(_raw_png(33, 17, 8, 2, stream, idat_pieces=pieces))
            assert (info.width, info.height) == (33, 17)


@pytest.mark.parametrize(
    "layout",
    [
        {"interlace": 1},
        {"between": png_chunk(b"tEXt", b"k\x00v"), "idat_pieces": 2},
        {"after_idat": png_chunk(b"tEXt", b"k\x00v")},
        {"after_idat": png_chunk(b"zTXt", b"k\x00\x00" + zlib.compress(b"v" * 10))},
        {"before_idat": png_chunk(b"tRNS", b"\x00\x01")},
    ],
)
def test_unusual_png_layouts_keep_pillows_verdict(layout: dict[str, Any]) -> None:
    rows = _rows(9, 5, 8, 1, filters=b"\x00\x04")
    for stream in (zlib.compress(rows), zlib.compress(rows[:-3]), b"\x00" * 8):
        data = _raw_png(9, 5, 8, 0, stream, **layout)
        assert _fast_verdict(data) == _pillow_verdict(data)


def test_plain_png_is_verified_without_building_its_pixels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The scanline check holds ~1 MiB, never the image (RGB at 4 bytes a pixel): what
    # keeps a large output's base64, bytes and verification within the memory bound.
    data = encode(Image.fromarray(noise(300, 200, alpha=False)), "PNG")
    broken = _raw_png(300, 200, 8, 2, zlib.compress(b"\x05" + bytes(900) * 200))

    def refuse(self: Image.Image) -> None:
        raise AssertionError("the pixels were decoded")

    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load", refuse)
    info = inspect_image(data)
    assert (info.width, info.height, info.has_alpha) == (300, 200, False)
    monkeypatch.undo()
    with pytest.raises(BridgeError, match="malformed or incomplete"):
        inspect_image(broken)
