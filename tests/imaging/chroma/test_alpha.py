"""A matte's counts."""

from __future__ import annotations

import numpy as np

from imagebridge.imaging.chroma.alpha import AlphaSummary, summarize_alpha


def test_summary_counts() -> None:
    array = np.zeros((3, 3, 4), dtype=np.uint8)
    array[0, 0, 3] = 255
    array[1, 1, 3] = 128
    assert summarize_alpha(array) == AlphaSummary(9, 7, 1, 1, 3)
