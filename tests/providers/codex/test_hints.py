"""Emulated shape hints: the aspect sentence and the nearest tool size."""

from __future__ import annotations

import pytest

from imagebridge.contract.enums import Resolution
from imagebridge.providers.codex.capabilities import responses_sizes
from imagebridge.providers.codex.hints import ratio_of_size, size_for_hints, with_aspect_line

LARGE = responses_sizes("gpt-image-2")
SMALL = responses_sizes("gpt-image-1")


@pytest.mark.parametrize(
    ("ratio", "resolution", "allowed", "expected"),
    [
        ("16:9", None, LARGE, "1536x1024"),
        ("9:16", None, LARGE, "1024x1536"),
        ("1:1", None, LARGE, "1024x1024"),
        ("16:9", Resolution.TWO_K, LARGE, "2048x1152"),
        ("1:1", Resolution.TWO_K, LARGE, "2048x2048"),
        ("16:9", Resolution.FOUR_K, LARGE, "3840x2160"),
        ("9:16", Resolution.FOUR_K, LARGE, "2160x3840"),
        ("16:9", Resolution.FOUR_K, SMALL, "1536x1024"),
        (None, Resolution.TWO_K, LARGE, "2048x2048"),
    ],
)
def test_hints_pick_the_nearest_allowed_size(
    ratio: str | None, resolution: Resolution | None, allowed: list[str], expected: str
) -> None:
    assert size_for_hints(ratio, resolution, allowed) == expected


def test_without_hints_the_size_is_left_alone() -> None:
    assert size_for_hints(None, None, LARGE) is None
    assert size_for_hints("1:1", None, []) is None


def test_aspect_sentence_and_size_ratio() -> None:
    assert with_aspect_line("a cat", (16, 9)) == "a cat\n\nAspect ratio: 16:9."
    assert with_aspect_line("a cat", None) == "a cat"
    assert ratio_of_size("1536x1024") == (3, 2)
    assert ratio_of_size("auto") is None
