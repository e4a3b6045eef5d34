"""The ``mock`` provider's pixels: deterministic images drawn from (prompt, output index).

A two-colour gradient with a disc, seeded by a hash of the prompt and the output index, so the
same request always yields the same bytes; an edit tints its source, and a masked edit is
composited through the mask with a hard edge (:mod:`imagebridge.imaging.masks`). Apart from
:mod:`imagebridge.providers.mock` (the provider: capabilities, sessions, directives, latency,
failures) because tests and other providers' tests draw with :func:`render_image` directly.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import io
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from PIL import Image

from imagebridge.contract.enums import OutputFormat
from imagebridge.engine.inputs import LoadedImage
from imagebridge.imaging.masks import blend_through_mask, mask_alpha

__all__ = [
    "MaskedSource",
    "open_masked",
    "open_source",
    "render_image",
    "render_image_async",
    "render_masked",
]


def _seed_bytes(prompt: str, index: int) -> bytes:
    return hashlib.sha256(f"{index}\x00{prompt}".encode()).digest()


def render_image(
    prompt: str,
    index: int,
    width: int,
    height: int,
    output_format: OutputFormat,
    *,
    transparent: bool = False,
    compression: int | None = None,
    source: Image.Image | None = None,
) -> bytes:
    """Deterministic pixels for (prompt, index): a two-colour gradient with a disc.

    The same small image is drawn again and again under load (tests, benchmarks, partial
    previews): those come from a bounded cache, since the bytes depend only on the inputs.
    """
    if source is None and width * height <= _CACHED_RENDER_PIXELS:
        return _render_cached(prompt, index, width, height, output_format, transparent, compression)
    return _render(prompt, index, width, height, output_format, transparent, compression, source)


_CACHED_RENDER_PIXELS = 256 * 256
"""Renders up to this size are cached: at most 64 entries of ≤ ~260 KiB each."""
_INLINE_RENDER_PIXELS = 128 * 128
"""Renders up to this size (≤ ~1 ms, then cached) run on the event loop, not a thread."""


async def render_image_async(
    prompt: str,
    index: int,
    width: int,
    height: int,
    output_format: OutputFormat,
    *,
    transparent: bool = False,
    compression: int | None = None,
    source: Image.Image | None = None,
) -> bytes:
    """:func:`render_image`, in a worker thread unless the image is tiny."""
    render = functools.partial(
        render_image,
        prompt,
        index,
        width,
        height,
        output_format,
        transparent=transparent,
        compression=compression,
        source=source,
    )
    if source is None and width * height <= _INLINE_RENDER_PIXELS:
        return render()
    return await asyncio.to_thread(render)


@functools.lru_cache(maxsize=64)
def _render_cached(
    prompt: str,
    index: int,
    width: int,
    height: int,
    output_format: OutputFormat,
    transparent: bool,
    compression: int | None,
) -> bytes:
    return _render(prompt, index, width, height, output_format, transparent, compression, None)


def open_source(image: LoadedImage) -> Image.Image:
    """The pixels of an edit source the engine already verified (a worker-thread job)."""
    source = Image.open(io.BytesIO(image.data))
    source.load()
    return source


def _render(
    prompt: str,
    index: int,
    width: int,
    height: int,
    output_format: OutputFormat,
    transparent: bool,
    compression: int | None,
    source: Image.Image | None,
) -> bytes:
    alpha = transparent and output_format is not OutputFormat.JPEG
    return _encode(_draw(prompt, index, width, height, alpha, source), output_format, compression)


def _draw(
    prompt: str, index: int, width: int, height: int, transparent: bool, source: Image.Image | None
) -> Image.Image:
    seed = _seed_bytes(prompt, index)
    start = np.frombuffer(seed[0:3], dtype=np.uint8).astype(np.float32)
    end = np.frombuffer(seed[3:6], dtype=np.uint8).astype(np.float32)
    if source is not None:
        base = np.asarray(source.convert("RGB").resize((width, height)), dtype=np.float32)
        tint = (start + end) / 2
        rgb = base * 0.7 + tint * 0.3
    else:
        ramp = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
        rgb = np.broadcast_to(start + (end - start) * ramp, (height, width, 3)).copy()
    ys, xs = np.ogrid[:height, :width]
    cx, cy = width * (0.3 + seed[6] / 640), height * (0.3 + seed[7] / 640)
    radius = max(1.0, min(width, height) * (0.15 + seed[8] / 1280))
    disc = (xs - cx) ** 2 + (ys - cy) ** 2 <= radius**2
    rgb[disc] = np.frombuffer(seed[9:12], dtype=np.uint8)
    pixels = np.clip(rgb, 0, 255).astype(np.uint8)
    if transparent:
        alpha = np.where(disc, 255, 0).astype(np.uint8)
        return Image.fromarray(np.dstack([pixels, alpha]), mode="RGBA")
    return Image.fromarray(pixels, mode="RGB")


def _encode(image: Image.Image, output_format: OutputFormat, compression: int | None) -> bytes:
    buffer = io.BytesIO()
    if output_format is OutputFormat.PNG:
        image.save(buffer, format="PNG", compress_level=1)
    elif output_format is OutputFormat.JPEG:
        image.save(buffer, format="JPEG", quality=compression if compression is not None else 90)
    else:
        if compression is None:
            # exact: the colour under a see-through pixel is kept, as the bridge's encoders do
            image.save(buffer, format="WEBP", lossless=True, exact=True)
        else:
            image.save(buffer, format="WEBP", quality=compression)
    return buffer.getvalue()


Plane = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class MaskedSource:
    """An edit's source and mask as pixel planes, read once per call (a worker-thread job)."""

    source: Image.Image
    pixels: Plane
    """The source as RGBA, at its own size: what the mask keeps."""
    alpha: Plane
    """The mask's alpha: below 255 marks the area to change (imaging/masks.py)."""
    keeps_alpha: bool
    """The source has an alpha channel, which the composite keeps."""

    @property
    def size(self) -> tuple[int, int]:
        return self.source.size


def open_masked(image: LoadedImage, mask: LoadedImage) -> MaskedSource:
    source = open_source(image)
    return MaskedSource(
        source=source,
        pixels=np.asarray(source.convert("RGBA"), dtype=np.uint8),
        alpha=mask_alpha(open_source(mask)),
        keeps_alpha=image.info.has_alpha,
    )


def render_masked(
    prompt: str,
    index: int,
    output_format: OutputFormat,
    transparent: bool,
    compression: int | None,
    masked: MaskedSource,
) -> bytes:
    """The edit drawn at the source's size, kept to the mask's transparent area.

    A hard edge (no feather): a pixel the mask keeps is the source's exactly, a fully
    transparent one is the drawn edit's, and partial transparency blends in proportion.
    """
    transparent = transparent and output_format is not OutputFormat.JPEG
    width, height = masked.size
    drawn = _draw(prompt, index, width, height, transparent, masked.source).convert("RGBA")
    fresh = np.asarray(drawn, dtype=np.uint8)
    pixels = blend_through_mask(masked.pixels, fresh, masked.alpha, feather_px=0)
    image = Image.fromarray(pixels, mode="RGBA")
    if not (transparent or masked.keeps_alpha) or output_format is OutputFormat.JPEG:
        image = image.convert("RGB")
    return _encode(image, output_format, compression)
