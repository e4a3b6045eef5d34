"""Small real images for tests, encoded by Pillow: PNG bytes, their base64 and a data URL.

One plain colour, so they compress to a few hundred bytes; callers say the size when it
matters to what they check. Richer images live beside the tests that need them
(``tests/artifacts/images.py``: JPEG, WebP, chunk surgery, bombs; ``tests/support/
openai_server.py``: transparent borders).
"""

from __future__ import annotations

import base64
import io
import os
from typing import Any

from PIL import Image

Colour = str | tuple[int, ...]


def encoded_png(image: Image.Image, **options: Any) -> bytes:
    """``image`` as PNG bytes (``options`` as Pillow's, e.g. ``compress_level=1``)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", **options)
    return buffer.getvalue()


def png_bytes(
    width: int = 1, height: int = 1, color: Colour = (255, 0, 0), *, mode: str = "RGB"
) -> bytes:
    """A ``width`` × ``height`` PNG of one ``color`` (``mode`` "RGBA" for an alpha channel)."""
    return encoded_png(Image.new(mode, (width, height), color))


def noise_png(width: int, height: int, *, compress_level: int = 6) -> bytes:
    """Random RGB pixels: a PNG that does not compress, to reach a byte size on purpose."""
    noise = Image.frombytes("RGB", (width, height), os.urandom(width * height * 3))
    return encoded_png(noise, compress_level=compress_level)


def png_b64(
    width: int = 1, height: int = 1, color: Colour = (255, 0, 0), *, mode: str = "RGB"
) -> str:
    """:func:`png_bytes`, base64-encoded (an inline input, a ``b64_json`` answer)."""
    return base64.b64encode(png_bytes(width, height, color, mode=mode)).decode()


def png_data_url(
    width: int = 1, height: int = 1, color: Colour = (255, 0, 0), *, mode: str = "RGB"
) -> str:
    """:func:`png_bytes` as a ``data:image/png;base64,…`` URL."""
    return "data:image/png;base64," + png_b64(width, height, color, mode=mode)
