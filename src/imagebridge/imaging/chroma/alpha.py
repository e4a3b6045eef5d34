"""A matte's counts, and the rules that refuse an unusable one.

The same rules judge a chroma-keyed output and a natively transparent one (which skips
the corner rule: its subject may touch the frame).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from imagebridge.imaging.chroma.keys import Pixels, chroma_error

__all__ = ["AlphaSummary", "summarize_alpha", "summarize_alpha_plane", "validate_alpha"]


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


def summarize_alpha(rgba: Pixels) -> AlphaSummary:
    """Transparent/partial/opaque counts and transparent corners of an RGBA array."""
    return summarize_alpha_plane(rgba[:, :, 3])


def summarize_alpha_plane(alpha: Pixels) -> AlphaSummary:
    """:func:`summarize_alpha` of an ``(h, w)`` alpha plane."""
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
        raise chroma_error(
            "background removal produced no meaningful transparent region",
            transparent_pixels=summary.transparent_pixels,
            total_pixels=summary.total_pixels,
        )
    if summary.opaque_pixels + summary.partial_pixels < minimum_region:
        raise chroma_error("background removal erased the entire visible subject")
    if require_transparent_corners and summary.transparent_corners < 2:
        raise chroma_error(
            "background removal left an opaque border around the generated subject",
            transparent_corners=summary.transparent_corners,
        )
