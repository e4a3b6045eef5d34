"""Header dimensions: a PNG's framing and CRCs, JPEG and WebP sizes, read before decoding."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from imagebridge.imaging import headers
from imagebridge.imaging.inspect import ImageLimits, inspect_image
from tests.artifacts.images import encode, jpeg, noise, png, webp
from tests.imaging.inspection import input_error


@pytest.mark.parametrize("cut", [1, 8, 12, 20, 30])
def test_rejects_truncated_png_after_header_probe(cut: int) -> None:
    # Pillow alone decodes a PNG whose IEND chunk is missing; we must not.
    error = input_error(png(3, 2)[:-cut])
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
    monkeypatch.setattr(headers, "_CRC_SLICE", slice_bytes)
    data = encode(Image.fromarray(noise(40, 30, alpha=False)), "PNG")
    assert inspect_image(data).width == 40
    for offset in (33 + 8, len(data) // 2, len(data) - 13):  # IDAT's start, middle, end
        broken = bytearray(data)
        broken[offset] ^= 0x01
        assert input_error(bytes(broken)).message == "image payload is malformed or incomplete"


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


def test_decoded_pixels_are_not_needed_to_read_header_of_bytes_io() -> None:
    # The header parser reads JPEG SOF after APP segments.
    image = Image.new("RGB", (7, 3))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", exif=b"Exif\x00\x00" + b"\x00" * 64)
    assert inspect_image(buffer.getvalue()).width == 7
