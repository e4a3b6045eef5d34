"""The vectorised kernel computes exactly the plain per-pixel reference's pixels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from imagebridge.imaging.chroma.kernel import apply_chroma_key
from imagebridge.imaging.chroma.keys import ChromaKey, ChromaOptions
from tests.imaging.chroma.support import BLUE, GREEN, MAGENTA, reference

keys = st.one_of(
    st.sampled_from([GREEN, MAGENTA, BLUE, ChromaKey(255, 255, 255), ChromaKey(0, 0, 0)]),
    st.builds(ChromaKey, st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)),
)


@st.composite
def chroma_options(draw: st.DrawFn) -> ChromaOptions:
    transparent = draw(st.integers(0, 254))
    opaque = draw(st.integers(transparent + 1, 255))
    return ChromaOptions(draw(keys), transparent, opaque, draw(st.booleans()))


@st.composite
def keyed_images(draw: st.DrawFn) -> tuple[np.ndarray, ChromaOptions]:
    options = draw(chroma_options())
    shape = (draw(st.integers(1, 12)), draw(st.integers(1, 12)), 4)
    array = draw(hnp.arrays(np.uint8, shape))
    # Pull some pixels close to the key so every branch of the matte is exercised.
    offsets = draw(hnp.arrays(np.int16, (*shape[:2], 3), elements=st.integers(-40, 40)))
    near = draw(hnp.arrays(np.bool_, shape[:2]))
    close = np.clip(np.array(options.key, dtype=np.int16) + offsets, 0, 255).astype(np.uint8)
    array[near, :3] = close[near]
    if draw(st.booleans()):
        array[..., 3] = 255
    return array, options


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keyed_images())
def test_vectorised_kernel_equals_reference(case: tuple[np.ndarray, ChromaOptions]) -> None:
    array, options = case
    expected = reference(array, options)
    assert np.array_equal(apply_chroma_key(array.copy(), options), expected)


@pytest.mark.parametrize(
    ("key", "opaque_source"),
    [(GREEN, True), (MAGENTA, False), (ChromaKey(3, 250, 7), True), (ChromaKey(90, 90, 90), False)],
)
def test_kernel_equals_reference_across_block_boundaries(
    key: ChromaKey, opaque_source: bool
) -> None:
    # 257×257 = 66 049 pixels spans two processing blocks.
    rng = np.random.default_rng(sum(key) + opaque_source)
    array = rng.integers(0, 256, (257, 257, 4), dtype=np.uint8)
    near = rng.random((257, 257)) < 0.6
    jitter = rng.integers(-60, 61, (257, 257, 3))
    array[near, :3] = np.clip(np.array(key) + jitter, 0, 255)[near]
    if opaque_source:
        array[..., 3] = 255
    options = ChromaOptions(key=key)
    assert np.array_equal(apply_chroma_key(array.copy(), options), reference(array, options))


def test_kernel_accepts_non_contiguous_views() -> None:
    rng = np.random.default_rng(7)
    base = rng.integers(0, 256, (10, 20, 4), dtype=np.uint8)
    view = base[:, ::2]
    expected = reference(np.ascontiguousarray(view), ChromaOptions())
    apply_chroma_key(view, ChromaOptions())
    assert np.array_equal(base[:, ::2], expected)
