"""Chroma-key background removal with the original's exact integer arithmetic.

A provider without native alpha is asked to paint the subject on a flat key colour;
this module turns that colour into transparency. The per-pixel rules are
integer-only, so every result is reproducible bit for bit. They are
evaluated here with numpy over blocks of pixels: everything that depends on a single
8-bit quantity (distance → soft alpha, (key strength, non-key strength) → dominance
alpha, (matte, source alpha) → final alpha) is a precomputed lookup table, so the
vectorised kernel is a handful of table look-ups and min/max passes per block.

Pixel work is CPU-bound: call the ``a*`` wrappers from async code (worker thread).
Failures raise ``BridgeError(code=artifact, details.stage=transparent_background)``;
decoding failures keep the ``input`` code of :mod:`imagebridge.imaging.inspect`.
"""

from __future__ import annotations

import asyncio
import io
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from PIL import Image

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, decode_verified, inspect_image

__all__ = [
    "DEFAULT_KEY",
    "AlphaSummary",
    "ChromaKey",
    "ChromaOptions",
    "ChromaResult",
    "adetect_border_key",
    "ainspect_transparent_alpha",
    "apply_chroma_key",
    "aremove_background",
    "aremove_chroma_key",
    "border_key_from_pixels",
    "choose_key_for_prompt",
    "detect_border_key",
    "inspect_transparent_alpha",
    "remove_background",
    "remove_chroma_key",
    "summarize_alpha",
    "validate_alpha",
]

Pixels = npt.NDArray[np.uint8]

_KEY_LIKE_DISTANCE = 32
_KEY_DOMINANCE_THRESHOLD = 16
_ALPHA_NOISE_FLOOR = 8
_DESPILL_ALPHA_CEILING = 252
_SCALE = 65_535
#: Pixels processed per block: intermediates stay cache-resident.
_BLOCK_PIXELS = 1 << 16


def _chroma_error(message: str, **details: Any) -> BridgeError:
    return BridgeError(
        ErrorCode.ARTIFACT, message, details={"stage": "transparent_background", **details}
    )


class ChromaKey(NamedTuple):
    """An sRGB key colour."""

    red: int
    green: int
    blue: int

    @classmethod
    def parse(cls, value: str) -> ChromaKey:
        """``#RRGGBB`` or ``RRGGBB`` (any case)."""
        text = value[1:] if value.startswith("#") else value
        if len(text) != 6 or not all(c in "0123456789abcdefABCDEF" for c in text):
            raise _chroma_error("chroma key must be a hex RGB color like #00ff00")
        return cls(int(text[0:2], 16), int(text[2:4], 16), int(text[4:6], 16))

    @property
    def hex(self) -> str:
        """Lower-case ``#rrggbb``."""
        return f"#{self.red:02x}{self.green:02x}{self.blue:02x}"


DEFAULT_KEY = ChromaKey(0, 255, 0)


@dataclass(frozen=True, slots=True)
class ChromaOptions:
    """Matte controls (``output.transparency``): thresholds are Chebyshev RGB distances."""

    key: ChromaKey = DEFAULT_KEY
    transparent_threshold: int = 12
    opaque_threshold: int = 96
    despill: bool = True

    def validate(self) -> None:
        for name in ("transparent_threshold", "opaque_threshold"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
                raise _chroma_error(f"{name.replace('_', ' ')} must be between 0 and 255")
        if self.transparent_threshold >= self.opaque_threshold:
            raise _chroma_error("transparent threshold must be lower than opaque threshold")
        if not all(isinstance(c, int) and 0 <= c <= 255 for c in self.key):
            raise _chroma_error("chroma key must be a hex RGB color like #00ff00")


@dataclass(frozen=True, slots=True)
class AlphaSummary:
    """Counts that prove a matte is usable."""

    total_pixels: int
    transparent_pixels: int
    partial_pixels: int
    opaque_pixels: int
    transparent_corners: int

    def to_dict(self) -> dict[str, int]:
        return {
            "total_pixels": self.total_pixels,
            "transparent_pixels": self.transparent_pixels,
            "partial_pixels": self.partial_pixels,
            "opaque_pixels": self.opaque_pixels,
            "transparent_corners": self.transparent_corners,
        }


@dataclass(frozen=True, slots=True)
class ChromaResult:
    """Re-encoded RGBA image, its verified metadata, the key used and the matte counts."""

    data: bytes
    info: ImageInfo
    key: ChromaKey
    alpha: AlphaSummary


# -- lookup tables ------------------------------------------------------------------------


class _Tables(NamedTuple):
    key: ChromaKey
    spill: tuple[bool, bool, bool]
    soft: Pixels  # distance → soft alpha
    dominance: Pixels  # (key strength << 8 | non-key strength) → dominance alpha
    dominant: npt.NDArray[np.bool_]  # same index → dominance ≥ 16
    alpha: Pixels  # (matte << 8 | source alpha) → final alpha, noise floor applied
    soft_floored: Pixels  # ``soft`` with values ≤ noise floor set to 0 (opaque sources)
    dominance_floored: Pixels  # ``dominance`` likewise


def _spill_channels(key: ChromaKey) -> tuple[bool, bool, bool]:
    maximum = max(key)
    if maximum < 128:
        return (False, False, False)
    floor = max(maximum - 16, 0)
    red, green, blue = (value >= floor and value >= 128 for value in key)
    return (red, green, blue)


def _soft_alpha(distance: int, transparent: int, opaque: int) -> int:
    if distance <= transparent:
        return 0
    if distance >= opaque:
        return 255
    ratio = (distance - transparent) * _SCALE // (opaque - transparent)
    smooth = ratio * ratio * (3 * _SCALE - 2 * ratio) // (_SCALE * _SCALE)
    return (smooth * 255 + _SCALE // 2) // _SCALE


def _floored(values: Pixels) -> Pixels:
    out = values.copy()
    out[out <= _ALPHA_NOISE_FLOOR] = 0
    return out


def _tables(options: ChromaOptions) -> _Tables:
    key = options.key
    spill = _spill_channels(key)
    soft = np.array(
        [
            _soft_alpha(d, options.transparent_threshold, options.opaque_threshold)
            for d in range(256)
        ],
        dtype=np.uint8,
    )
    # Two-byte tables are indexed by ``high << 8 | low``.
    strength = np.arange(256, dtype=np.int32)
    high = np.repeat(strength, 256)
    low = np.tile(strength, 256)
    # (key strength, non-key strength) → dominance and its alpha
    dominance = high - low if any(spill) else np.zeros(65536, dtype=np.int32)
    denominator = np.maximum(max(key) - low, 1)
    remaining = denominator - np.minimum(dominance, denominator)
    dom_alpha = np.where(
        dominance <= 0, 255, (remaining * 255 + denominator // 2) // denominator
    ).astype(np.uint8)
    # (matte, source alpha) → final alpha
    alpha = (high * low + 127) // 255
    alpha[alpha <= _ALPHA_NOISE_FLOOR] = 0
    return _Tables(
        key=key,
        spill=spill,
        soft=soft,
        dominance=dom_alpha,
        dominant=dominance >= _KEY_DOMINANCE_THRESHOLD,
        alpha=alpha.astype(np.uint8),
        soft_floored=_floored(soft),
        dominance_floored=_floored(dom_alpha),
    )


# -- the kernel -------------------------------------------------------------------------------
#
# Per-pixel branches are expressed as bit masks (0x00 / 0xff) combined with & and |:
# numpy's masked assignment and ``where`` are an order of magnitude slower on the
# unpredictable masks a real matte produces.


def _mask(flags: npt.NDArray[np.bool_]) -> Pixels:
    """0xff where ``flags`` else 0x00."""
    return np.negative(flags.view(np.uint8))


class _Constants(NamedTuple):
    channels: tuple[Pixels, Pixels, Pixels]  # each key channel broadcast to a block
    full: Pixels  # 0xff
    one: Pixels  # 0x01
    zero: Pixels


def _constants(key: ChromaKey, size: int) -> _Constants:
    def filled(value: int) -> Pixels:
        return np.full(size, value, dtype=np.uint8)

    return _Constants(
        channels=(filled(key.red), filled(key.green), filled(key.blue)),
        full=filled(255),
        one=filled(1),
        zero=filled(0),
    )


def _distance(plane: Pixels, key_value: int, key_plane: Pixels, consts: _Constants) -> Pixels:
    if key_value == 0:
        return plane
    if key_value == 255:
        return np.subtract(consts.full[: plane.shape[0]], plane)
    n = plane.shape[0]
    return np.subtract(np.maximum(plane, key_plane[:n]), np.minimum(plane, key_plane[:n]))


def _key_planes(
    planes: tuple[Pixels, Pixels, Pixels, Pixels],
    options: ChromaOptions,
    tables: _Tables,
    consts: _Constants,
    *,
    opaque_source: bool,
) -> None:
    """Apply the matte in place to one block given as four contiguous 1-D planes."""
    rgb = planes[:3]
    source_alpha = planes[3]
    n = source_alpha.shape[0]
    distance = _distance(rgb[0], tables.key.red, consts.channels[0], consts)
    for c in (1, 2):
        distance = np.maximum(
            distance, _distance(rgb[c], tables.key[c], consts.channels[c], consts)
        )
    spill_planes = [rgb[c] for c in range(3) if tables.spill[c]]
    other_planes = [rgb[c] for c in range(3) if not tables.spill[c]]
    key_strength = spill_planes[0] if spill_planes else consts.zero[:n]
    for plane in spill_planes[1:]:
        key_strength = np.minimum(key_strength, plane)
    non_key = other_planes[0] if other_planes else consts.zero[:n]
    for plane in other_planes[1:]:
        non_key = np.maximum(non_key, plane)
    pair = np.bitwise_or(np.left_shift(key_strength, 8, dtype=np.uint16), non_key)
    key_like = np.bitwise_or(distance <= _KEY_LIKE_DISTANCE, np.take(tables.dominant, pair))
    key_like_mask = _mask(key_like)
    if opaque_source:
        # alpha == matte for an opaque source; the noise floor is folded into the tables.
        alpha = np.minimum(
            np.take(tables.soft_floored, distance), np.take(tables.dominance_floored, pair)
        )
        alpha |= ~key_like_mask
    else:
        matte = np.minimum(np.take(tables.soft, distance), np.take(tables.dominance, pair))
        matte |= ~key_like_mask
        alpha = np.take(
            tables.alpha, np.bitwise_or(np.left_shift(matte, 8, dtype=np.uint16), source_alpha)
        )
    visible = _mask(alpha != 0)
    if options.despill and spill_planes:
        clean = key_like_mask & visible & _mask(alpha < _DESPILL_ALPHA_CEILING)
        if clean.any():
            anchor = np.subtract(np.maximum(non_key, consts.one[:n]), consts.one[:n])
            keep = ~clean
            for c in range(3):
                if tables.spill[c]:
                    plane = rgb[c]
                    cleaned = np.minimum(plane, anchor)
                    np.bitwise_or(cleaned & clean, plane & keep, out=plane)
    for plane in rgb:
        plane &= visible
    source_alpha[...] = alpha


def _key_plane_arrays(
    planes: tuple[Pixels, Pixels, Pixels, Pixels], options: ChromaOptions
) -> None:
    """Key full-image planes block by block (intermediates stay cache-resident)."""
    tables = _tables(options)
    total = planes[3].shape[0]
    consts = _constants(options.key, min(total, _BLOCK_PIXELS))
    opaque_source = bool(total) and int(planes[3].min()) == 255
    for start in range(0, total, _BLOCK_PIXELS):
        stop = start + _BLOCK_PIXELS
        block = (
            planes[0][start:stop],
            planes[1][start:stop],
            planes[2][start:stop],
            planes[3][start:stop],
        )
        _key_planes(block, options, tables, consts, opaque_source=opaque_source)


def apply_chroma_key(rgba: Pixels, options: ChromaOptions) -> Pixels:
    """Key out ``options.key`` from an ``(h, w, 4)`` uint8 RGBA array, in place.

    Returns the same array. This is the pure pixel kernel; it neither decodes nor
    validates the result.
    """
    options.validate()
    if rgba.dtype != np.uint8 or rgba.ndim != 3 or rgba.shape[2] != 4:
        raise _chroma_error("chroma key expects an RGBA8 pixel array")
    if not rgba.flags.writeable:
        raise _chroma_error("chroma key expects a writable pixel array")
    planes = tuple(np.ascontiguousarray(rgba[:, :, c]).reshape(-1) for c in range(4))
    _key_plane_arrays((planes[0], planes[1], planes[2], planes[3]), options)
    for c in range(4):
        rgba[:, :, c] = planes[c].reshape(rgba.shape[:2])
    return rgba


def summarize_alpha(rgba: Pixels) -> AlphaSummary:
    """Transparent/partial/opaque counts and transparent corners of an RGBA array."""
    return _summarize_alpha_plane(rgba[:, :, 3])


def _summarize_alpha_plane(alpha: Pixels) -> AlphaSummary:
    height, width = alpha.shape
    total = width * height
    transparent = int(np.count_nonzero(alpha == 0))
    opaque = int(np.count_nonzero(alpha == 255))
    corners = sum(
        1
        for y, x in ((0, 0), (0, width - 1), (height - 1, 0), (height - 1, width - 1))
        if alpha[y, x] == 0
    )
    return AlphaSummary(
        total_pixels=total,
        transparent_pixels=transparent,
        partial_pixels=total - transparent - opaque,
        opaque_pixels=opaque,
        transparent_corners=corners,
    )


def validate_alpha(summary: AlphaSummary, *, require_transparent_corners: bool) -> None:
    """Refuse mattes with no background removed, no subject left, or an opaque frame."""
    minimum_region = max(summary.total_pixels // 1000, 1)
    if summary.transparent_pixels < minimum_region:
        raise _chroma_error(
            "background removal produced no meaningful transparent region",
            transparent_pixels=summary.transparent_pixels,
            total_pixels=summary.total_pixels,
        )
    if summary.opaque_pixels + summary.partial_pixels < minimum_region:
        raise _chroma_error("background removal erased the entire visible subject")
    if require_transparent_corners and summary.transparent_corners < 2:
        raise _chroma_error(
            "background removal left an opaque border around the generated subject",
            transparent_corners=summary.transparent_corners,
        )


def border_key_from_pixels(rgba: Pixels) -> ChromaKey:
    """Per-channel upper median of a band (≤ 6 px) around the image border."""
    return _border_key(rgba[:, :, 0], rgba[:, :, 1], rgba[:, :, 2])


def _border_key(*channels: Pixels) -> ChromaKey:
    height, width = channels[0].shape
    if height == 0 or width == 0:
        raise _chroma_error("image border did not contain sampleable pixels")
    shortest = min(width, height)
    band = max(1, min(shortest, 6))
    step = max(shortest // 256, 1)
    median: list[int] = []
    for plane in channels:
        samples = np.concatenate(
            [
                plane[:band, ::step].ravel(),
                plane[height - band :, ::step].ravel(),
                plane[::step, :band].ravel(),
                plane[::step, width - band :].ravel(),
            ]
        )
        middle = samples.shape[0] // 2
        median.append(int(np.partition(samples, middle)[middle]))
    return ChromaKey(median[0], median[1], median[2])


# -- whole-image operations ----------------------------------------------------------------


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
        raise _chroma_error("image could not be decoded for background removal") from exc
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
        raise _chroma_error("transparent image could not be encoded") from exc
    return buffer.getvalue()


def _check_output_format(output_format: OutputFormat | str) -> OutputFormat:
    try:
        fmt = OutputFormat(output_format)
    except ValueError:
        fmt = OutputFormat.JPEG
    if fmt not in (OutputFormat.PNG, OutputFormat.WEBP):
        raise _chroma_error("transparent output requires PNG or WebP encoding")
    return fmt


def _key_and_encode(
    planes: _Planes, options: ChromaOptions, output_format: OutputFormat, limits: ImageLimits
) -> ChromaResult:
    _key_plane_arrays(planes.tuple4(), options)
    summary = _summarize_alpha_plane(planes.grid(planes.alpha))
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
        detected = _border_key(
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
    return _border_key(planes.grid(planes.red), planes.grid(planes.green), planes.grid(planes.blue))


def inspect_transparent_alpha(data: bytes, limits: ImageLimits | None = None) -> AlphaSummary:
    """Validate a natively transparent output (no corner rule)."""
    _, image = decode_verified(data, limits or ImageLimits())
    planes = _planes(image)
    summary = _summarize_alpha_plane(planes.grid(planes.alpha))
    validate_alpha(summary, require_transparent_corners=False)
    return summary


# -- prompt-aware key choice ----------------------------------------------------------------

_KEY_WORDS: tuple[tuple[ChromaKey, tuple[str, ...]], ...] = (
    (ChromaKey(0, 255, 0), ("green", "verde", "lime", "emerald", "smeraldo", "forest")),
    (ChromaKey(255, 0, 255), ("magenta", "pink", "rosa", "purple", "viola", "fuchsia")),
    (ChromaKey(0, 0, 255), ("blue", "blu", "azzurro", "cyan", "cobalt", "navy")),
)
_KEY_PATTERNS = tuple(
    (key, re.compile(r"\b(?:" + "|".join(words) + r")\b")) for key, words in _KEY_WORDS
)


def choose_key_for_prompt(prompt: str) -> ChromaKey:
    """The key colour the prompt mentions least (ties: green, magenta, blue).

    Whole words only, so "blue" is not also counted as "blu" and "rosary" is not pink.
    """
    text = prompt.lower()
    counts = [
        (len(pattern.findall(text)), index) for index, (_, pattern) in enumerate(_KEY_PATTERNS)
    ]
    _, best = min(counts)
    return _KEY_PATTERNS[best][0]


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
