"""What an encoder did: re-encoding into the format asked for, and reading a JPEG's quality.

A transport may answer in another format than asked (the Codex backend answers PNG
whatever it is sent); the bridge then re-encodes the verified pixels into the asked
format and says so. A JPEG's quality is not stored in the file, but its quantization
tables show it: scaled from the standard tables of the JPEG specification (Annex K) the
way libjpeg scales them, they give the quality setting back to within a point or two.

Pure functions over bytes; callers run them in a worker thread.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from imagebridge.contract.enums import OutputFormat
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, decode_verified, inspect_image

__all__ = ["DEFAULT_JPEG_QUALITY", "estimate_jpeg_quality", "recode", "see_through_pixels"]

DEFAULT_JPEG_QUALITY = 95
"""JPEG/WebP quality of a re-encoding when the request names no ``output_compression``."""

# The luminance table of ITU T.81 Annex K (K.1), in natural (row-major) order.
_STANDARD_LUMINANCE = (
    16, 11, 10, 16, 24, 40, 51, 61,
    12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77,
    24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101,
    72, 92, 95, 98, 112, 100, 103, 99,
)  # fmt: skip


def estimate_jpeg_quality(data: bytes) -> int | None:
    """The libjpeg quality (1–100) the luminance table of ``data`` was made with, or
    ``None`` when ``data`` is not a JPEG or its table is not a scaled standard one."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "JPEG":
                return None
            tables = getattr(image, "quantization", None) or {}
            table = tables.get(0)
    except Exception:
        return None
    if table is None or len(table) != 64:
        return None
    # Pillow returns the table in natural order (as the standard one is given here).
    best: tuple[int, int] | None = None
    for quality in range(1, 101):
        scale = 5000 // quality if quality < 50 else 200 - 2 * quality
        expected = [min(max((base * scale + 50) // 100, 1), 255) for base in _STANDARD_LUMINANCE]
        error = sum(abs(a - b) for a, b in zip(expected, table, strict=True))
        if best is None or error < best[1]:
            best = (quality, error)
    assert best is not None
    quality, error = best
    return quality if error <= 64 else None


def recode(
    data: bytes,
    output_format: OutputFormat,
    *,
    compression: int | None = None,
    limits: ImageLimits | None = None,
) -> tuple[bytes, ImageInfo]:
    """``data``'s pixels encoded as ``output_format`` (alpha kept where the format has it).

    JPEG and lossy WebP use ``compression`` as their quality (``DEFAULT_JPEG_QUALITY`` when
    unset; WebP without one is lossless).
    """
    limits = limits or ImageLimits()
    info, image = decode_verified(data, limits)
    buffer = io.BytesIO()
    try:
        mode = "RGBA" if info.has_alpha and output_format is not OutputFormat.JPEG else "RGB"
        converted = image.convert(mode)
        if output_format is OutputFormat.PNG:
            converted.save(buffer, format="PNG")
        elif output_format is OutputFormat.JPEG:
            quality = compression if compression is not None else DEFAULT_JPEG_QUALITY
            converted.save(buffer, format="JPEG", quality=max(1, min(quality, 100)))
        elif compression is None:
            converted.save(buffer, format="WEBP", lossless=True, exact=True)
        else:
            converted.save(buffer, format="WEBP", quality=max(1, min(compression, 100)))
        converted.close()
    finally:
        image.close()
    encoded = buffer.getvalue()
    return encoded, inspect_image(encoded, limits)


def see_through_pixels(data: bytes, limits: ImageLimits | None = None) -> int:
    """How many pixels of ``data`` are not fully opaque (0 without an alpha channel)."""
    info, image = decode_verified(data, limits or ImageLimits())
    try:
        if not info.has_alpha:
            return 0
        alpha = np.asarray(image.convert("RGBA").getchannel("A"), dtype=np.uint8)
        return int(np.count_nonzero(alpha < 255))
    finally:
        image.close()
