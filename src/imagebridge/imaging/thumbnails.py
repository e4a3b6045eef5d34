"""Small PNG previews of a verified image (the artifact routes' ``?thumbnail=``).

The source is decoded under the caller's limits like any other image; the preview is
inspected in turn under limits no larger than the requested edge, so what the bridge
serves is always an image it has verified.
"""

from __future__ import annotations

import asyncio
import io

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import ImageLimits, decode_verified, inspect_image

__all__ = ["MAX_THUMBNAIL_EDGE", "MIN_THUMBNAIL_EDGE", "amake_thumbnail", "make_thumbnail"]

MIN_THUMBNAIL_EDGE = 32
MAX_THUMBNAIL_EDGE = 2048


def make_thumbnail(data: bytes, edge: int, limits: ImageLimits | None = None) -> bytes:
    """A PNG that fits inside ``edge``×``edge``, aspect kept, never upscaled."""
    limits = limits or ImageLimits()
    if (
        isinstance(edge, bool)
        or not isinstance(edge, int)
        or not MIN_THUMBNAIL_EDGE <= edge <= MAX_THUMBNAIL_EDGE
    ):
        raise BridgeError(
            ErrorCode.INPUT,
            "thumbnail edge must be between 32 and 2048 pixels",
            details={"field": "edge", "minimum": MIN_THUMBNAIL_EDGE, "maximum": MAX_THUMBNAIL_EDGE},
        )
    info, image = decode_verified(data, limits)
    try:
        if image.mode not in ("1", "L", "LA", "RGB", "RGBA"):
            image = image.convert("RGBA" if info.has_alpha else "RGB")
        image.thumbnail((edge, edge))
        output = io.BytesIO()
        image.save(output, format="PNG")
    except Exception as exc:
        raise BridgeError(ErrorCode.INPUT, "thumbnail could not be encoded") from exc
    finally:
        image.close()
    encoded = output.getvalue()
    inspect_image(
        encoded,
        ImageLimits(
            max_encoded_bytes=limits.max_encoded_bytes,
            max_edge=edge,
            max_pixels=edge * edge,
            max_decode_alloc=limits.max_decode_alloc,
        ),
    )
    return encoded


async def amake_thumbnail(data: bytes, edge: int, limits: ImageLimits | None = None) -> bytes:
    """:func:`make_thumbnail` in a worker thread."""
    return await asyncio.to_thread(make_thumbnail, data, edge, limits)
