"""Whole encoded images: decode under limits, key or sample, validate, re-encode, verify.

The entry points callers use: the materializer's chroma step and alpha check
(:func:`remove_background`, :func:`inspect_transparent_alpha`), ``background remove`` in
the CLI, and their ``a*`` wrappers for async code.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from PIL import Image

from imagebridge.contract.enums import OutputFormat
from imagebridge.imaging.chroma.alpha import AlphaSummary, summarize_alpha_plane, validate_alpha
from imagebridge.imaging.chroma.kernel import key_plane_arrays
from imagebridge.imaging.chroma.keys import (
    DEFAULT_KEY,
    ChromaKey,
    ChromaOptions,
    Pixels,
    border_key,
    chroma_error,
)
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, decode_verified, inspect_image

__all__ = [
    "ChromaResult",
    "adetect_border_key",
    "ainspect_transparent_alpha",
    "aremove_background",
    "aremove_chroma_key",
    "detect_border_key",
    "inspect_transparent_alpha",
    "remove_background",
    "remove_chroma_key",
]


@dataclass(frozen=True, slots=True)
class ChromaResult:
    """Re-encoded RGBA image, its verified metadata, the key used and the matte counts."""

    data: bytes
    info: ImageInfo
    key: ChromaKey
    alpha: AlphaSummary


class _Planes(NamedTuple):
    width: int
    height: int
    red: Pixels
    green: Pixels
    blue: Pixels
    alpha: Pixels

    def tuple4(self) -> tuple[Pixels, Pixels, Pixels, Pixels]:
        return (self.red, self.green, self.blue, self.alpha)

    def grid(self, plane: Pixels) -> Pixels:
        return plane.reshape(self.height, self.width)


def _planes(image: Image.Image) -> _Planes:
    """Writable contiguous R, G, B, A planes (Pillow splits bands in C)."""
    try:
        if image.mode not in ("RGB", "RGBA") or "transparency" in image.info:
            converted = image.convert("RGBA")
            image.close()
            image = converted
        bands = image.split()
        width, height = image.size
        planes = [np.array(band, dtype=np.uint8).reshape(-1) for band in bands]
    except Exception as exc:
        raise chroma_error("image could not be decoded for background removal") from exc
    finally:
        image.close()
    if len(planes) == 3:
        planes.append(np.full(width * height, 255, dtype=np.uint8))
    return _Planes(width, height, planes[0], planes[1], planes[2], planes[3])


def _encode(planes: _Planes, output_format: OutputFormat) -> bytes:
    buffer = io.BytesIO()
    try:
        bands = [Image.fromarray(planes.grid(p)) for p in planes.tuple4()]
        image = Image.merge("RGBA", bands)
        if output_format is OutputFormat.PNG:
            image.save(buffer, format="PNG")
        else:
            image.save(buffer, format="WEBP", lossless=True, exact=True)
    except Exception as exc:
        raise chroma_error("transparent image could not be encoded") from exc
    return buffer.getvalue()


def _check_output_format(output_format: OutputFormat | str) -> OutputFormat:
    try:
        fmt = OutputFormat(output_format)
    except ValueError:
        fmt = OutputFormat.JPEG
    if fmt not in (OutputFormat.PNG, OutputFormat.WEBP):
        raise chroma_error("transparent output requires PNG or WebP encoding")
    return fmt


def _key_and_encode(
    planes: _Planes, options: ChromaOptions, output_format: OutputFormat, limits: ImageLimits
) -> ChromaResult:
    key_plane_arrays(planes.tuple4(), options)
    summary = summarize_alpha_plane(planes.grid(planes.alpha))
    validate_alpha(summary, require_transparent_corners=True)
    encoded = _encode(planes, output_format)
    info = inspect_image(encoded, limits)
    return ChromaResult(data=encoded, info=info, key=options.key, alpha=summary)


def remove_chroma_key(
    data: bytes,
    output_format: OutputFormat | str,
    options: ChromaOptions | None = None,
    limits: ImageLimits | None = None,
) -> ChromaResult:
    """Remove a known key colour, validate the matte and re-encode as PNG or lossless WebP."""
    options = options or ChromaOptions()
    limits = limits or ImageLimits()
    options.validate()
    fmt = _check_output_format(output_format)
    _, image = decode_verified(data, limits)
    return _key_and_encode(_planes(image), options, fmt, limits)


def remove_background(
    data: bytes,
    *,
    key: str | ChromaKey = "auto",
    transparent_threshold: int = 12,
    opaque_threshold: int = 96,
    despill: bool = True,
    output_format: OutputFormat | str = OutputFormat.PNG,
    limits: ImageLimits | None = None,
) -> ChromaResult:
    """Key out the background; ``key="auto"`` samples it from the image border.

    This is both ``background remove`` in the CLI and the materializer's chroma step
    (which always samples the actual border rather than trusting the planned key).
    """
    limits = limits or ImageLimits()
    explicit = key if isinstance(key, ChromaKey) else None
    if explicit is None and isinstance(key, str) and key.strip().lower() != "auto":
        explicit = ChromaKey.parse(key.strip())
    probe = ChromaOptions(
        key=explicit or DEFAULT_KEY,
        transparent_threshold=transparent_threshold,
        opaque_threshold=opaque_threshold,
        despill=despill,
    )
    probe.validate()
    fmt = _check_output_format(output_format)
    _, image = decode_verified(data, limits)
    planes = _planes(image)
    if explicit is None:
        detected = border_key(
            planes.grid(planes.red), planes.grid(planes.green), planes.grid(planes.blue)
        )
        probe = _with_key(probe, detected)
    return _key_and_encode(planes, probe, fmt, limits)


def _with_key(options: ChromaOptions, key: ChromaKey) -> ChromaOptions:
    return ChromaOptions(
        key=key,
        transparent_threshold=options.transparent_threshold,
        opaque_threshold=options.opaque_threshold,
        despill=options.despill,
    )


def detect_border_key(data: bytes, limits: ImageLimits | None = None) -> ChromaKey:
    """The background colour a provider actually painted, sampled from the border."""
    _, image = decode_verified(data, limits or ImageLimits())
    planes = _planes(image)
    return border_key(planes.grid(planes.red), planes.grid(planes.green), planes.grid(planes.blue))


def inspect_transparent_alpha(data: bytes, limits: ImageLimits | None = None) -> AlphaSummary:
    """Validate a natively transparent output (no corner rule)."""
    _, image = decode_verified(data, limits or ImageLimits())
    planes = _planes(image)
    summary = summarize_alpha_plane(planes.grid(planes.alpha))
    validate_alpha(summary, require_transparent_corners=False)
    return summary


# -- async wrappers ---------------------------------------------------------------------------


async def aremove_chroma_key(
    data: bytes,
    output_format: OutputFormat | str,
    options: ChromaOptions | None = None,
    limits: ImageLimits | None = None,
) -> ChromaResult:
    """:func:`remove_chroma_key` in a worker thread."""
    return await asyncio.to_thread(remove_chroma_key, data, output_format, options, limits)


async def aremove_background(
    data: bytes,
    *,
    key: str | ChromaKey = "auto",
    transparent_threshold: int = 12,
    opaque_threshold: int = 96,
    despill: bool = True,
    output_format: OutputFormat | str = OutputFormat.PNG,
    limits: ImageLimits | None = None,
) -> ChromaResult:
    """:func:`remove_background` in a worker thread."""
    return await asyncio.to_thread(
        lambda: remove_background(
            data,
            key=key,
            transparent_threshold=transparent_threshold,
            opaque_threshold=opaque_threshold,
            despill=despill,
            output_format=output_format,
            limits=limits,
        )
    )


async def adetect_border_key(data: bytes, limits: ImageLimits | None = None) -> ChromaKey:
    """:func:`detect_border_key` in a worker thread."""
    return await asyncio.to_thread(detect_border_key, data, limits)


async def ainspect_transparent_alpha(
    data: bytes, limits: ImageLimits | None = None
) -> AlphaSummary:
    """:func:`inspect_transparent_alpha` in a worker thread."""
    return await asyncio.to_thread(inspect_transparent_alpha, data, limits)
