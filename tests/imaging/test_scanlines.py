"""Plain PNGs are verified by inflating every scanline, with Pillow's verdict."""

from __future__ import annotations

import random
import struct
import zlib
from typing import Any

import pytest
from PIL import Image, PngImagePlugin

from imagebridge.contract.errors import BridgeError
from imagebridge.imaging import scanlines
from imagebridge.imaging.inspect import ImageLimits, decode_verified, inspect_image
from tests.artifacts.images import encode, noise, png_chunk


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
    monkeypatch.setattr(scanlines, "_INFLATE_INPUT", piece_bytes)
    monkeypatch.setattr(scanlines, "_INFLATE_OUTPUT", max(piece_bytes, 64))
    monkeypatch.setattr(scanlines, "WHOLE_INFLATE_MAX_BYTES", whole_max)
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
