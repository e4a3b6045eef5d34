"""What the chroma tests share: the three prompt keys, the reference over numpy arrays,
and the fault every chroma step raises."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.chroma.keys import ChromaKey, ChromaOptions
from tests.imaging.chroma.reference import reference_key_image

GREEN = ChromaKey(0, 255, 0)
MAGENTA = ChromaKey(255, 0, 255)
BLUE = ChromaKey(0, 0, 255)


def pixels_of(array: np.ndarray) -> list[tuple[int, int, int, int]]:
    return [(int(r), int(g), int(b), int(a)) for r, g, b, a in array.reshape(-1, 4)]


def reference(array: np.ndarray, options: ChromaOptions) -> np.ndarray:
    """The plain per-pixel reference applied to an ``(h, w, 4)`` array (a keyed copy)."""
    keyed = reference_key_image(
        pixels_of(array),
        (options.key.red, options.key.green, options.key.blue),
        options.transparent_threshold,
        options.opaque_threshold,
        options.despill,
    )
    return np.array(keyed, dtype=np.uint8).reshape(array.shape)


def chroma_error(call: Callable[[], object]) -> BridgeError:
    """The fault ``call`` raises: ``artifact``, at stage ``transparent_background``."""
    with pytest.raises(BridgeError) as caught:
        call()
    assert caught.value.code is ErrorCode.ARTIFACT
    assert caught.value.details["stage"] == "transparent_background"
    return caught.value
