"""Emulated shape hints for the Codex backend (``aspect_ratio``, ``resolution``, sizes).

The subscription backend largely ignores the ``size`` it is sent and follows the prompt
text instead: a line naming the aspect ratio gives that shape.
So an aspect ratio becomes one short sentence after the prompt, and for the Responses
tool it also picks the closest size the tool accepts, within the resolution tier asked for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from imagebridge.contract.enums import Resolution
from imagebridge.contract.request import (
    RESOLUTION_LONG_EDGE,
    parse_aspect_ratio,
    parse_size,
    resolution_tier,
)

__all__ = ["aspect_line", "ratio_of_size", "size_for_hints", "with_aspect_line"]

_TIER_LONG_EDGE: Final = RESOLUTION_LONG_EDGE


def aspect_line(width: int, height: int) -> str:
    return f"Aspect ratio: {width}:{height}."


def with_aspect_line(prompt: str, ratio: tuple[int, int] | None) -> str:
    """``prompt`` followed by the aspect sentence (unchanged when ``ratio`` is ``None``)."""
    if ratio is None:
        return prompt
    return f"{prompt}\n\n{aspect_line(*ratio)}"


def ratio_of_size(size: str) -> tuple[int, int] | None:
    """``"1536x1024"`` → ``(3, 2)``; ``"auto"`` → ``None``."""
    dims = parse_size(size)
    if dims is None:
        return None
    divisor = math.gcd(*dims)
    return dims[0] // divisor, dims[1] // divisor


def _tier(size: str) -> Resolution:
    dims = parse_size(size)
    assert dims is not None
    return resolution_tier(*dims)


def size_for_hints(
    aspect_ratio: str | None, resolution: Resolution | None, allowed: Sequence[str]
) -> str | None:
    """The allowed size closest to the hinted shape, or ``None`` when nothing is hinted.

    The tier is the requested resolution (else 1k); a model without that tier uses its
    largest one. Within the tier the size whose aspect ratio is nearest (on a log scale)
    wins; ties go to the first size in sorted order.
    """
    if (aspect_ratio is None and resolution is None) or not allowed:
        return None
    width, height = parse_aspect_ratio(aspect_ratio) if aspect_ratio is not None else (1, 1)
    wanted_tier = resolution or Resolution.ONE_K
    tiers = {size: _tier(size) for size in allowed}
    candidates = sorted(size for size, tier in tiers.items() if tier is wanted_tier)
    if not candidates:
        order = list(_TIER_LONG_EDGE)
        best = max(tiers.values(), key=order.index)
        candidates = sorted(size for size, tier in tiers.items() if tier is best)
    target = math.log(width / height)

    def distance(size: str) -> float:
        dims = parse_size(size)
        assert dims is not None
        return abs(math.log(dims[0] / dims[1]) - target)

    return min(candidates, key=distance)


ASPECT_TOLERANCE = 0.02
"""Relative difference of width/height ratios still counted as the same shape (16:9 is
1672×941 on the images route, 0.05 % off)."""


def aspect_differs(
    ratio: tuple[int, int], width: int, height: int, *, tolerance: float = ASPECT_TOLERANCE
) -> bool:
    """Whether a ``width``×``height`` image misses the ``ratio`` it was asked for."""
    if width <= 0 or height <= 0:
        return True
    wanted = ratio[0] / ratio[1]
    return abs((width / height) / wanted - 1) > tolerance


def reduced_ratio(width: int, height: int) -> str:
    """``1672, 941`` → ``"1672:941"``; ``1254, 1254`` → ``"1:1"``."""
    divisor = math.gcd(width, height) or 1
    return f"{width // divisor}:{height // divisor}"
