from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.chroma import (
    AlphaSummary,
    ChromaKey,
    ChromaOptions,
    adetect_border_key,
    ainspect_transparent_alpha,
    apply_chroma_key,
    aremove_background,
    aremove_chroma_key,
    border_key_from_pixels,
    choose_key_for_prompt,
    detect_border_key,
    inspect_transparent_alpha,
    remove_background,
    remove_chroma_key,
    summarize_alpha,
)
from imagebridge.imaging.inspect import inspect_image
from tests.artifacts.images import decode_rgba, encode, keyed_fixture
from tests.imaging.chroma_reference import reference_border_key, reference_key_image

GREEN = ChromaKey(0, 255, 0)
MAGENTA = ChromaKey(255, 0, 255)
BLUE = ChromaKey(0, 0, 255)


def pixels_of(array: np.ndarray) -> list[tuple[int, int, int, int]]:
    return [(int(r), int(g), int(b), int(a)) for r, g, b, a in array.reshape(-1, 4)]


def reference(array: np.ndarray, options: ChromaOptions) -> np.ndarray:
    keyed = reference_key_image(
        pixels_of(array),
        (options.key.red, options.key.green, options.key.blue),
        options.transparent_threshold,
        options.opaque_threshold,
        options.despill,
    )
    return np.array(keyed, dtype=np.uint8).reshape(array.shape)


def chroma_error(call: object) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        call()  # type: ignore[operator]
    assert caught.value.code is ErrorCode.ARTIFACT
    assert caught.value.details["stage"] == "transparent_background"
    return caught.value


# -- spec fixtures ------------------------------------------------------------------------------


def test_removes_key_preserves_subject_and_normalizes_transparent_rgb() -> None:
    result = remove_chroma_key(keyed_fixture(), OutputFormat.PNG, ChromaOptions())
    assert result.alpha == AlphaSummary(400, 300, 0, 100, 4)
    decoded = decode_rgba(result.data)
    assert decoded[0, 0].tolist() == [0, 0, 0, 0]
    assert decoded[10, 10].tolist() == [220, 30, 20, 255]
    assert result.info == inspect_image(result.data)
    assert result.info.has_alpha


def test_rejects_invalid_thresholds_and_non_keyed_outputs() -> None:
    error = chroma_error(
        lambda: remove_chroma_key(
            keyed_fixture(), "png", ChromaOptions(transparent_threshold=96, opaque_threshold=12)
        )
    )
    assert error.message == "transparent threshold must be lower than opaque threshold"
    white = encode(Image.new("RGB", (20, 20), (255, 255, 255)), "PNG")
    error = chroma_error(lambda: remove_chroma_key(white, "png"))
    assert error.message == "background removal produced no meaningful transparent region"
    assert error.details["transparent_pixels"] == 0
    assert error.details["total_pixels"] == 400


def test_refuses_a_matte_that_erases_the_subject() -> None:
    green = encode(Image.new("RGB", (20, 20), (0, 255, 0)), "PNG")
    error = chroma_error(lambda: remove_chroma_key(green, "png"))
    assert error.message == "background removal erased the entire visible subject"


def test_refuses_an_opaque_border_but_native_alpha_skips_the_corner_rule() -> None:
    pixels = np.zeros((20, 20, 4), dtype=np.uint8)
    pixels[...] = (200, 40, 40, 255)
    pixels[5:15, 5:15] = (0, 255, 0, 255)
    data = encode(Image.fromarray(pixels), "PNG")
    error = chroma_error(lambda: remove_chroma_key(data, "png"))
    assert error.details["transparent_corners"] == 0
    native = pixels.copy()
    native[5:15, 5:15, 3] = 0
    summary = inspect_transparent_alpha(encode(Image.fromarray(native), "PNG"))
    assert (summary.transparent_pixels, summary.transparent_corners) == (100, 0)
    opaque = encode(Image.new("RGB", (20, 20), (1, 2, 3)), "PNG")
    assert (
        chroma_error(lambda: inspect_transparent_alpha(opaque)).details["transparent_pixels"] == 0
    )


def test_output_must_be_png_or_webp() -> None:
    error = chroma_error(lambda: remove_chroma_key(keyed_fixture(), OutputFormat.JPEG))
    assert error.message == "transparent output requires PNG or WebP encoding"


def test_webp_output_is_lossless() -> None:
    as_png = remove_chroma_key(keyed_fixture(), "png")
    as_webp = remove_chroma_key(keyed_fixture(), "webp")
    assert as_webp.info.format is OutputFormat.WEBP
    assert np.array_equal(decode_rgba(as_webp.data), decode_rgba(as_png.data))


def test_despill_pulls_key_colour_out_of_partial_edges() -> None:
    pixels = np.zeros((20, 20, 4), dtype=np.uint8)
    pixels[...] = (0, 255, 0, 255)
    pixels[5:15, 5:15] = (220, 30, 20, 255)
    pixels[5:15, 4] = (110, 180, 40, 255)  # an antialiased green-tinted edge
    data = encode(Image.fromarray(pixels), "PNG")
    with_despill = decode_rgba(remove_chroma_key(data, "png").data)[10, 4]
    without = decode_rgba(remove_chroma_key(data, "png", ChromaOptions(despill=False)).data)[10, 4]
    assert 0 < with_despill[3] < 255
    assert with_despill[1] <= with_despill[0] - 1 < without[1]
    expected = reference(pixels[10:11, 4:5], ChromaOptions())[0, 0]
    assert with_despill.tolist() == expected.tolist()


# -- exactness against the plain per-pixel reference ------------------------------------------

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


def test_summary_counts() -> None:
    array = np.zeros((3, 3, 4), dtype=np.uint8)
    array[0, 0, 3] = 255
    array[1, 1, 3] = 128
    assert summarize_alpha(array) == AlphaSummary(9, 7, 1, 1, 3)


# -- keys -------------------------------------------------------------------------------------


def test_key_parsing_and_hex() -> None:
    assert ChromaKey.parse("#00FF00") == GREEN
    assert ChromaKey.parse("ff00ff").hex == "#ff00ff"
    for bad in ("#0f0", "00ff0g", "", "#00ff001"):
        assert chroma_error(lambda bad=bad: ChromaKey.parse(bad)).message.startswith(
            "chroma key must be"
        )


def test_detects_the_painted_border_colour() -> None:
    pixels = np.zeros((30, 40, 4), dtype=np.uint8)
    pixels[...] = (4, 250, 9, 255)
    pixels[10:20, 10:30] = (200, 10, 10, 255)
    assert detect_border_key(encode(Image.fromarray(pixels), "PNG")) == ChromaKey(4, 250, 9)


def test_remove_background_auto_uses_the_border_and_explicit_keys_are_honoured() -> None:
    pixels = np.zeros((20, 20, 4), dtype=np.uint8)
    pixels[...] = (250, 5, 250, 255)
    pixels[5:15, 5:15] = (20, 200, 40, 255)
    data = encode(Image.fromarray(pixels), "PNG")
    auto = remove_background(data)
    assert auto.key == ChromaKey(250, 5, 250)
    assert (auto.alpha.transparent_pixels, auto.alpha.opaque_pixels) == (300, 100)
    explicit = remove_background(data, key="#fa05fa", output_format="webp")
    assert explicit.key == ChromaKey(250, 5, 250)
    assert explicit.info.format is OutputFormat.WEBP
    with pytest.raises(BridgeError):
        remove_background(data, key="#00ff00")  # wrong key: nothing transparent


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


async def test_async_wrappers_run_the_same_work() -> None:
    fixture = keyed_fixture()
    assert (await aremove_chroma_key(fixture, "png")).alpha.transparent_pixels == 300
    assert (await aremove_background(fixture)).key == GREEN
    assert await adetect_border_key(fixture) == GREEN
    result = remove_chroma_key(fixture, "png")
    assert (await ainspect_transparent_alpha(result.data)).transparent_pixels == 300
