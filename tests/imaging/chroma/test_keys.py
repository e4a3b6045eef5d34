"""Key colours: parsed, sampled from the border as the reference does, chosen for a prompt."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from imagebridge.imaging.chroma.keys import ChromaKey, border_key_from_pixels, choose_key_for_prompt
from tests.imaging.chroma.reference import reference_border_key
from tests.imaging.chroma.support import BLUE, GREEN, MAGENTA, chroma_error, pixels_of


@settings(max_examples=150, deadline=None)
@given(hnp.arrays(np.uint8, st.tuples(st.integers(1, 40), st.integers(1, 40), st.just(4))))
def test_border_key_equals_reference(array: np.ndarray) -> None:
    height, width = array.shape[:2]
    assert tuple(border_key_from_pixels(array)) == reference_border_key(
        pixels_of(array), width, height
    )


def test_border_key_samples_with_a_step_on_large_images() -> None:
    rng = np.random.default_rng(3)
    array = rng.integers(0, 256, (530, 700, 4), dtype=np.uint8)  # step 2
    assert tuple(border_key_from_pixels(array)) == reference_border_key(pixels_of(array), 700, 530)


def test_key_parsing_and_hex() -> None:
    assert ChromaKey.parse("#00FF00") == GREEN
    assert ChromaKey.parse("ff00ff").hex == "#ff00ff"
    for bad in ("#0f0", "00ff0g", "", "#00ff001"):
        assert chroma_error(lambda bad=bad: ChromaKey.parse(bad)).message.startswith(
            "chroma key must be"
        )


@pytest.mark.parametrize(
    ("prompt", "key"),
    [
        ("an emerald green dragon", MAGENTA),
        ("a cat on a sofa", GREEN),
        ("A BLUE bird", GREEN),
        ("a green frog holding a rosary", MAGENTA),  # "rosa" inside "rosary" is not pink
        ("pink pink pink, green green, blue", BLUE),  # "blu" inside "blue" is not counted
        ("verde, lime, magenta, fuchsia and navy", BLUE),
    ],
)
def test_prompt_aware_key_choice_uses_whole_words(prompt: str, key: ChromaKey) -> None:
    assert choose_key_for_prompt(prompt) == key
