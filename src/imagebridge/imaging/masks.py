"""Edit masks done by the bridge: where a mask marks, and compositing an edit through it.

A mask follows OpenAI's rule: its transparent pixels (alpha below 255) mark the area to
change, opaque pixels the area to keep. For a transport that cannot take a mask, the
bridge sends the edit without it and then composites: outside the marked area the result
is the source image's pixels exactly; inside, the generated pixels, with a seam feathered
*inwards* over ``feather_px`` pixels so that nothing outside the area is ever touched.
A generated image of another size is resampled to the source's size first.

Pure functions over bytes (numpy and Pillow); callers run them in a worker thread. The
pixel steps are public too (:func:`mask_alpha`, :func:`blend_through_mask`), so a
provider that takes masks natively (the offline mock) applies the same rule to its own
pixels instead of a second compositor.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, decode_verified, inspect_image

__all__ = [
    "MAX_FEATHER_PX",
    "CompositeResult",
    "MaskRegion",
    "blend_through_mask",
    "composite_masked",
    "describe_region",
    "mask_alpha",
    "mask_region",
]

MAX_FEATHER_PX = 256
"""Upper bound of ``feather_px`` (config checks it; each pixel of feather is one pass)."""

_JPEG_QUALITY = 95
"""JPEG quality of a composite when the request names no ``output_compression``."""

Plane = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class MaskRegion:
    """The bounding box of a mask's editable area (``x1``/``y1`` exclusive) and its share."""

    x0: int
    y0: int
    x1: int
    y1: int
    width: int
    height: int
    editable_pixels: int

    @property
    def box(self) -> list[int]:
        return [self.x0, self.y0, self.x1, self.y1]

    @property
    def empty(self) -> bool:
        return self.editable_pixels == 0


@dataclass(frozen=True, slots=True)
class CompositeResult:
    data: bytes
    info: ImageInfo
    generated_size: tuple[int, int]
    resampled: bool


def _mask_error(message: str, **details: Any) -> BridgeError:
    return BridgeError(ErrorCode.INPUT, message, details={"field": "mask", **details})


def mask_alpha(image: Image.Image) -> Plane:
    """A mask's alpha plane (255 where there is no alpha channel); closes ``image``."""
    try:
        if image.mode != "RGBA":
            converted = image.convert("RGBA")
            image.close()
            image = converted
        return np.array(image.getchannel("A"), dtype=np.uint8)
    finally:
        image.close()


def mask_region(mask: bytes, limits: ImageLimits) -> MaskRegion:
    """Where ``mask`` lets the edit change the image (``input`` error if nowhere)."""
    _, image = decode_verified(mask, limits)
    alpha = mask_alpha(image)
    editable = alpha < 255
    rows = np.flatnonzero(editable.any(axis=1))
    columns = np.flatnonzero(editable.any(axis=0))
    height, width = alpha.shape
    if rows.size == 0:
        raise _mask_error("the mask marks no area to edit (no transparent pixels)")
    return MaskRegion(
        x0=int(columns[0]),
        y0=int(rows[0]),
        x1=int(columns[-1]) + 1,
        y1=int(rows[-1]) + 1,
        width=width,
        height=height,
        editable_pixels=int(editable.sum()),
    )


def _third(start: float, end: float, names: tuple[str, str, str]) -> str:
    """Name a span of [0, 1] by the thirds it covers (``left``, ``centre``, ``right``)."""
    covered = [i for i in range(3) if start < (i + 1) / 3 and end > i / 3]
    if len(covered) == 3:
        return "full"
    return "-".join(names[i] for i in covered)


def describe_region(region: MaskRegion) -> str:
    """One sentence placing the editable area in words, for the prompt of a maskless edit."""
    left, right = region.x0 / region.width, region.x1 / region.width
    top, bottom = region.y0 / region.height, region.y1 / region.height
    horizontal = _third(left, right, ("left", "centre", "right"))
    vertical = _third(top, bottom, ("top", "middle", "bottom"))
    if horizontal == "full" and vertical == "full":
        where = "across the whole image"
    elif horizontal == "full":
        where = f"in the {vertical} band of the image"
    elif vertical == "full":
        where = f"in the {horizontal} band of the image"
    else:
        where = f"in the {vertical} {horizontal} part of the image"
    return (
        f"Change only the area {where}, from {round(left * 100)}% to {round(right * 100)}% "
        f"of the width and {round(top * 100)}% to {round(bottom * 100)}% of the height "
        "(measured from the top left); keep everything outside it exactly as it is."
    )


def _erode(region: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """One 3×3 erosion; the image's own border does not erode (there is no seam there)."""
    padded = np.pad(region, 1, mode="edge")
    height, width = region.shape
    result = region.copy()
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            if dy == 1 and dx == 1:
                continue
            result &= padded[dy : dy + height, dx : dx + width]
    return result


def _weights(alpha: Plane, feather_px: int) -> npt.NDArray[np.float32]:
    """The generated image's share per pixel: 0 wherever the mask is opaque.

    Inside the editable area the share ramps from ``1/(feather_px+1)`` at its edge to the
    mask's own transparency ``feather_px`` pixels in, so the seam is soft and the pixels
    outside the area stay exactly the source's.
    """
    editable = alpha < 255
    strength = (255 - alpha.astype(np.float32)) / 255.0
    if feather_px <= 0:
        return strength
    ramp = editable.astype(np.float32)
    layer = editable
    for _ in range(feather_px):
        layer = _erode(layer)
        if not layer.any():
            break
        ramp += layer
    return np.asarray(strength * (ramp / np.float32(feather_px + 1)), dtype=np.float32)


def _rgba(image: Image.Image) -> Plane:
    try:
        if image.mode != "RGBA":
            converted = image.convert("RGBA")
            image.close()
            image = converted
        return np.array(image, dtype=np.uint8)
    finally:
        image.close()


def _encode(
    pixels: Plane, keep_alpha: bool, output_format: OutputFormat, compression: int | None
) -> bytes:
    image = Image.fromarray(pixels, "RGBA")
    if not keep_alpha or output_format is OutputFormat.JPEG:
        image = image.convert("RGB")
    buffer = io.BytesIO()
    if output_format is OutputFormat.PNG:
        image.save(buffer, format="PNG")
    elif output_format is OutputFormat.JPEG:
        quality = compression if compression is not None else _JPEG_QUALITY
        image.save(buffer, format="JPEG", quality=max(1, min(quality, 100)))
    elif compression is None:
        image.save(buffer, format="WEBP", lossless=True, exact=True)
    else:
        image.save(buffer, format="WEBP", quality=max(1, min(compression, 100)))
    return buffer.getvalue()


def blend_through_mask(base: Plane, fresh: Plane, alpha: Plane, feather_px: int) -> Plane:
    """``fresh`` inside ``alpha``'s editable area, ``base`` everywhere else.

    ``base`` and ``fresh`` are RGBA planes of the mask's size. A pixel the mask keeps
    (alpha 255) is ``base``'s exactly; inside, ``fresh`` takes the mask's transparency as
    its share, feathered inwards over ``feather_px`` pixels (0: a hard edge).
    """
    editable = alpha < 255
    rows, columns = np.flatnonzero(editable.any(axis=1)), np.flatnonzero(editable.any(axis=0))
    out = base.copy()
    if rows.size:  # only the area's bounding box is blended: outside it, the source as is
        # one kept pixel of margin, so the feather sees the area's edge as the full image would
        height, width = alpha.shape
        box = (
            slice(max(int(rows[0]) - 1, 0), min(int(rows[-1]) + 2, height)),
            slice(max(int(columns[0]) - 1, 0), min(int(columns[-1]) + 2, width)),
        )
        weight = _weights(alpha[box], feather_px)[..., np.newaxis]
        kept = base[box]
        blended = kept.astype(np.float32) + (fresh[box].astype(np.float32) - kept) * weight
        out[box] = np.where(weight > 0, np.clip(np.rint(blended), 0, 255), kept).astype(np.uint8)
    return out


def composite_masked(
    source: bytes,
    mask: bytes,
    generated: bytes,
    *,
    feather_px: int,
    output_format: OutputFormat,
    compression: int | None = None,
    limits: ImageLimits | None = None,
) -> CompositeResult:
    """``generated`` inside ``mask``'s editable area, ``source`` everywhere else.

    The result has the source's size and is encoded in ``output_format`` (PNG and lossless
    WebP keep the source's pixels bit for bit outside the area; JPEG cannot).
    """
    limits = limits or ImageLimits()
    if not 0 <= feather_px <= MAX_FEATHER_PX:
        raise BridgeError(ErrorCode.CONFIGURATION, "mask feather_px is out of range")
    source_info, source_image = decode_verified(source, limits)
    _, mask_image = decode_verified(mask, limits)
    generated_info, generated_image = decode_verified(generated, limits)
    size = (source_info.width, source_info.height)
    if mask_image.size != size:
        mask_image.close()
        raise _mask_error("the mask must have the same dimensions as the first image")
    alpha = mask_alpha(mask_image)
    generated_size = (generated_info.width, generated_info.height)
    resampled = generated_size != size
    if resampled:
        converted = generated_image.convert("RGBA")
        generated_image.close()
        generated_image = converted.resize(size, Image.Resampling.LANCZOS)
        converted.close()
    out = blend_through_mask(_rgba(source_image), _rgba(generated_image), alpha, feather_px)
    keep_alpha = source_info.has_alpha or generated_info.has_alpha
    encoded = _encode(out, keep_alpha, output_format, compression)
    return CompositeResult(
        data=encoded,
        info=inspect_image(encoded, limits),
        generated_size=generated_size,
        resampled=resampled,
    )
