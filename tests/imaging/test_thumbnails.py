"""Thumbnails: bounded PNG previews, verified like any other image."""

from __future__ import annotations

import pytest
from PIL import Image

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError
from imagebridge.imaging.inspect import inspect_image
from imagebridge.imaging.thumbnails import amake_thumbnail, make_thumbnail
from tests.artifacts.images import encode, jpeg, png


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


async def test_async_wrapper_matches_sync() -> None:
    data = png(40, 20)
    assert await amake_thumbnail(data, 32) == make_thumbnail(data, 32)
