"""The key colour: parsed, bounded in the matte options, chosen for a prompt, or sampled
from the border of the image a provider painted."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "DEFAULT_KEY",
    "ChromaKey",
    "ChromaOptions",
    "Pixels",
    "border_key",
    "border_key_from_pixels",
    "choose_key_for_prompt",
    "chroma_error",
]

Pixels = npt.NDArray[np.uint8]


def chroma_error(message: str, **details: Any) -> BridgeError:
    """The fault of every chroma step (``artifact``, stage ``transparent_background``)."""
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
            raise chroma_error("chroma key must be a hex RGB color like #00ff00")
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
                raise chroma_error(f"{name.replace('_', ' ')} must be between 0 and 255")
        if self.transparent_threshold >= self.opaque_threshold:
            raise chroma_error("transparent threshold must be lower than opaque threshold")
        if not all(isinstance(c, int) and 0 <= c <= 255 for c in self.key):
            raise chroma_error("chroma key must be a hex RGB color like #00ff00")


# -- the key a provider painted ---------------------------------------------------------------


def border_key_from_pixels(rgba: Pixels) -> ChromaKey:
    """Per-channel upper median of a band (≤ 6 px) around the image border."""
    return border_key(rgba[:, :, 0], rgba[:, :, 1], rgba[:, :, 2])


def border_key(*channels: Pixels) -> ChromaKey:
    """:func:`border_key_from_pixels` over separate ``(h, w)`` R, G and B planes."""
    height, width = channels[0].shape
    if height == 0 or width == 0:
        raise chroma_error("image border did not contain sampleable pixels")
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
