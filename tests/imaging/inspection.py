"""The refusal every inspection test reads: an ``input`` fault, with no Pillow warning."""

from __future__ import annotations

import warnings

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import ImageLimits, inspect_image


def input_error(data: bytes, limits: ImageLimits | None = None) -> BridgeError:
    """The fault :func:`inspect_image` raises for ``data``; fails the test if it accepts."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no Pillow warning may escape
        with pytest.raises(BridgeError) as caught:
            inspect_image(data, limits)
    assert caught.value.code is ErrorCode.INPUT
    return caught.value
