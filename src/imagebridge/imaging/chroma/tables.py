"""The lookup tables of one set of matte options.

Everything in the matte that depends on a single 8-bit quantity, or on a pair of them,
is computed once per options here (256 or 65 536 entries), so the kernel's per-pixel
work is table look-ups and min/max passes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from imagebridge.imaging.chroma.keys import ChromaKey, ChromaOptions, Pixels

__all__ = ["Tables", "lookup_tables"]

_KEY_DOMINANCE_THRESHOLD = 16
_ALPHA_NOISE_FLOOR = 8
_SCALE = 65_535


class Tables(NamedTuple):
    """The lookup tables of one set of options (what each index means: the comments)."""

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


def lookup_tables(options: ChromaOptions) -> Tables:
    """Every table the kernel reads for ``options``."""
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
    return Tables(
        key=key,
        spill=spill,
        soft=soft,
        dominance=dom_alpha,
        dominant=dominance >= _KEY_DOMINANCE_THRESHOLD,
        alpha=alpha.astype(np.uint8),
        soft_floored=_floored(soft),
        dominance_floored=_floored(dom_alpha),
    )
