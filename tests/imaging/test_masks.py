"""Compositing an edit through a mask: exact outside, generated inside, a soft seam."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import ImageLimits
from imagebridge.imaging.masks import composite_masked, describe_region, mask_region


def encode(array: np.ndarray, mode: str, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array, mode).save(buffer, format=fmt)
    return buffer.getvalue()


def pixels(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        return np.array(image.convert("RGB"))


W, H = 40, 30
SOURCE = np.random.default_rng(7).integers(0, 256, (H, W, 3), dtype=np.uint8)


def mask(box: tuple[int, int, int, int], alpha: int = 0) -> bytes:
    rgba = np.zeros((H, W, 4), dtype=np.uint8)
    rgba[..., 3] = 255
    x0, y0, x1, y1 = box
    rgba[y0:y1, x0:x1, 3] = alpha
    return encode(rgba, "RGBA")


def test_outside_is_exact_inside_is_generated_and_the_seam_ramps() -> None:
    generated = encode(np.full((H, W, 3), 200, dtype=np.uint8), "RGB")
    result = composite_masked(
        encode(SOURCE, "RGB"),
        mask((10, 5, 30, 25)),
        generated,
        feather_px=3,
        output_format=OutputFormat.PNG,
    )
    out = pixels(result.data)
    outside = np.ones((H, W), dtype=bool)
    outside[5:25, 10:30] = False
    assert np.array_equal(out[outside], SOURCE[outside])
    assert np.all(out[8:22, 13:27] == 200)  # beyond the feather: the generated pixels
    edge = np.abs(out[15, 10].astype(int) - 200).sum()
    assert edge > 0  # the first pixel inside blends with the source
    assert not result.resampled and (result.info.width, result.info.height) == (W, H)


def test_a_generated_image_of_another_size_is_resampled_to_the_source() -> None:
    generated = encode(np.full((90, 120, 3), 50, dtype=np.uint8), "RGB")
    result = composite_masked(
        encode(SOURCE, "RGB"),
        mask((0, 0, W, H)),
        generated,
        feather_px=0,
        output_format=OutputFormat.PNG,
    )
    assert result.resampled and result.generated_size == (120, 90)
    assert (result.info.width, result.info.height) == (W, H)
    assert np.all(pixels(result.data) == 50)


def test_the_region_is_the_transparent_box_and_is_said_in_words() -> None:
    region = mask_region(mask((2, 3, 12, 9)), ImageLimits())
    assert region.box == [2, 3, 12, 9] and region.editable_pixels == 60
    sentence = describe_region(region)
    assert sentence.startswith("Change only the area in the top left part")
    assert "5% to 30% of the width" in sentence


def test_a_mask_marking_nothing_is_refused() -> None:
    with pytest.raises(BridgeError) as caught:
        mask_region(mask((0, 0, 0, 0)), ImageLimits())
    assert caught.value.code is ErrorCode.INPUT and caught.value.details["field"] == "mask"


def test_the_seam_is_the_same_whatever_part_of_the_image_is_blended() -> None:
    """The blend is computed in the area's bounding box only; the feather must still see
    the area's edge (not the box's) as a seam, as a whole-image blend does."""
    generated = encode(np.full((H, W, 3), 200, dtype=np.uint8), "RGB")
    source = encode(np.zeros((H, W, 3), dtype=np.uint8), "RGB")
    out = pixels(
        composite_masked(
            source,
            mask((10, 5, 30, 25)),
            generated,
            feather_px=4,
            output_format=OutputFormat.PNG,
        ).data
    )
    row = out[15, 10:30, 0].astype(int)
    # ramps up from the left edge and down to the right edge, symmetric: 1/5 … 5/5
    assert list(row[:5]) == [40, 80, 120, 160, 200]
    assert list(row[-5:]) == [200, 160, 120, 80, 40]
