"""The matte applied to RGBA pixels, block by block.

Per-pixel branches are expressed as bit masks (0x00 / 0xff) combined with & and |:
numpy's masked assignment and ``where`` are an order of magnitude slower on the
unpredictable masks a real matte produces. Blocks of :data:`_BLOCK_PIXELS` keep the
intermediates cache-resident.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from imagebridge.imaging.chroma.keys import ChromaKey, ChromaOptions, Pixels, chroma_error
from imagebridge.imaging.chroma.tables import Tables, lookup_tables

__all__ = ["apply_chroma_key", "key_plane_arrays"]

_KEY_LIKE_DISTANCE = 32
_DESPILL_ALPHA_CEILING = 252
#: Pixels processed per block: intermediates stay cache-resident.
_BLOCK_PIXELS = 1 << 16


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
    tables: Tables,
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


def key_plane_arrays(planes: tuple[Pixels, Pixels, Pixels, Pixels], options: ChromaOptions) -> None:
    """Key full-image planes block by block (intermediates stay cache-resident)."""
    tables = lookup_tables(options)
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
        raise chroma_error("chroma key expects an RGBA8 pixel array")
    if not rgba.flags.writeable:
        raise chroma_error("chroma key expects a writable pixel array")
    planes = tuple(np.ascontiguousarray(rgba[:, :, c]).reshape(-1) for c in range(4))
    key_plane_arrays((planes[0], planes[1], planes[2], planes[3]), options)
    for c in range(4):
        rgba[:, :, c] = planes[c].reshape(rgba.shape[:2])
    return rgba
