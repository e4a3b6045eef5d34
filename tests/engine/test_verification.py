"""Verification: the output set and every image's bytes are checked, nothing the provider
says is trusted, and the response's payload stays within its budget."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import numpy as np
import pytest
from PIL import Image

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.decoded import DecodedPayload, attach_decoded
from imagebridge.engine.materialize import MaterializeLimits, Materializer
from imagebridge.imaging.inspect import ImageLimits, inspect_image
from tests.artifacts.images import png_chunk
from tests.engine.outputs import failure, request, response, worker_thread_calls
from tests.support.fakes import image_item
from tests.support.images import encoded_png, png_bytes

# -- the output set ----------------------------------------------------------------------------


async def test_accepts_complete_indexed_best_effort_results() -> None:
    items = [image_item(0, png_bytes()), image_item(2, png_bytes())]
    eff = request(parameters={"n": 3, "failure_policy": "best_effort"})
    result = await Materializer().materialize(response(items, [failure(1)]), eff, None, owner="o")
    assert [i.index for i in result.data] == [0, 2]


@pytest.mark.parametrize("policy", ["fail_fast", "best_effort"])
async def test_rejects_partial_failures_in_fail_fast_and_duplicate_indices(policy: str) -> None:
    items = [image_item(0, png_bytes()), image_item(1, png_bytes())]
    eff = request(parameters={"n": 2, "failure_policy": policy})
    with pytest.raises(BridgeError) as caught:
        await Materializer().materialize(response(items, [failure(1)]), eff, None, owner="o")
    assert caught.value.code is ErrorCode.PROTOCOL


async def refused(resp: ImageResponse, eff: ImageRequest, **limits: Any) -> BridgeError:
    materializer = Materializer(MaterializeLimits(**limits))
    with pytest.raises(BridgeError) as caught:
        await materializer.materialize(resp, eff, None, owner="o")
    return caught.value


async def test_the_output_count_must_equal_the_effective_n() -> None:
    error = await refused(response([image_item(0, png_bytes())]), request(parameters={"n": 2}))
    assert (error.code, error.message) == (
        ErrorCode.PROTOCOL,
        "provider returned a different number of outputs",
    )
    assert (error.details["expected"], error.details["actual"]) == (2, 1)


@pytest.mark.parametrize(
    ("indices", "message"),
    [
        ([0, 2], "provider returned duplicate or missing output indices"),
        ([1, 1], "provider returned duplicate or missing output indices"),
        ([1, 0], "provider returned outputs in an unstable index order"),
    ],
)
async def test_output_indices_must_be_exactly_zero_to_n_in_order(
    indices: list[int], message: str
) -> None:
    items = [image_item(i, png_bytes()) for i in indices]
    error = await refused(response(items), request(parameters={"n": 2}))
    assert (error.code, error.message) == (ErrorCode.PROTOCOL, message)


# -- each image's bytes ------------------------------------------------------------------------


async def test_malformed_base64_and_undecodable_images() -> None:
    bad = image_item(0, png_bytes()).model_copy(update={"b64_json": "%%%"})
    with pytest.raises(BridgeError) as caught:
        await Materializer().materialize(response([bad]), request(), None, owner="o")
    assert caught.value.code is ErrorCode.PROTOCOL
    truncated = png_bytes(8, 8)[:40]
    item = image_item(0, png_bytes()).model_copy(
        update={"b64_json": base64.b64encode(truncated).decode()}
    )
    with pytest.raises(BridgeError) as verify:
        await Materializer().materialize(response([item]), request(), None, owner="o")
    assert verify.value.code is ErrorCode.ARTIFACT
    assert verify.value.message == "provider output image failed independent verification"
    assert verify.value.details["reason"]


async def test_base64_beyond_the_configured_bound_is_refused_before_decoding() -> None:
    item = image_item(0, png_bytes(8, 8))
    assert item.b64_json is not None
    error = await refused(response([item]), request(), max_base64_chars=len(item.b64_json) - 1)
    assert error.code is ErrorCode.PROTOCOL
    assert error.details["maximum_bytes"] == len(item.b64_json) - 1
    assert (
        await Materializer(MaterializeLimits(max_base64_chars=len(item.b64_json))).materialize(
            response([image_item(0, png_bytes(8, 8))]), request(), None, owner="o"
        )
    ).data[0].width == 8


async def test_payloads_the_bridge_cannot_verify_are_refused() -> None:
    data = png_bytes()
    url = image_item(0, data, type="url", b64_json=None, url="https://cdn.example/a.png")
    error = await refused(response([url]), request())
    assert error.code is ErrorCode.CONFIGURATION  # no remote-output fetcher in the materializer
    artifact = image_item(0, data, type="artifact", b64_json=None, id="x", name="a.png")
    error = await refused(response([artifact]), request())
    assert (error.code, error.message) == (
        ErrorCode.PROTOCOL,
        "provider returned an unverifiable internal payload type",
    )


@pytest.mark.parametrize(
    "lie",
    [{"width": 2}, {"height": 3}, {"bytes": 1}, {"sha256": "0" * 64}, {"format": "jpeg"}],
)
async def test_provider_declared_metadata_must_match_the_decoded_image(
    lie: dict[str, Any],
) -> None:
    item = image_item(0, png_bytes(), **lie)
    error = await refused(response([item]), request())
    assert error.message == "provider output metadata does not match the decoded image"
    assert error.code is ErrorCode.PROTOCOL
    assert error.details["output_index"] == 0


# -- the response's byte budget ----------------------------------------------------------------


async def test_rejects_outputs_that_exceed_the_aggregate_response_budget() -> None:
    items = [image_item(0, png_bytes()), image_item(1, png_bytes())]
    materializer = Materializer(MaterializeLimits(max_response_bytes=120))
    with pytest.raises(BridgeError) as caught:
        await materializer.materialize(
            response(items), request(parameters={"n": 2}), None, owner="o"
        )
    assert "aggregate response payload" in caught.value.message
    assert caught.value.details["maximum_bytes"] == 120


# -- memory and the event loop -----------------------------------------------------------------


def _noisy_png() -> bytes:
    noisy = np.random.default_rng(3).integers(0, 256, (700, 700, 3), dtype=np.uint8)
    return encoded_png(Image.fromarray(noisy, "RGB"), compress_level=1)


async def test_the_provider_base64_is_released_before_pixels_are_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Peak memory: the base64 text (1.33x the image) must not live beside its pixels."""
    import tracemalloc

    from imagebridge.engine import verification as module

    plain = _noisy_png()
    # a text chunk after the image data: a layout left to Pillow's full decode
    data = plain[:-12] + png_chunk(b"tEXt", b"k\x00v") + plain[-12:]
    text_bytes = len(base64.b64encode(data))
    seen: list[int] = []
    real_inspect = module.inspect_image

    def inspect(payload: bytes, limits: Any, **options: Any) -> Any:
        release = options.pop("before_pixel_buffer", None)

        def released() -> None:
            if release is not None:
                release()
            seen.append(tracemalloc.get_traced_memory()[0])

        return real_inspect(payload, limits, before_pixel_buffer=released, **options)

    monkeypatch.setattr(module, "inspect_image", inspect)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        provider_response = response([image_item(0, data)])  # the text is traced from here
        result = await Materializer().materialize(provider_response, request(), None, owner="o")
    finally:
        tracemalloc.stop()
    assert base64.b64decode(result.data[0].b64_json or "") == data
    assert provider_response.data[0].b64_json is None
    # while the pixels were decoded, the bridge held the decoded bytes, not bytes + text
    assert seen and seen[0] - before < len(data) + text_bytes // 2


async def test_a_plain_png_keeps_and_passes_on_the_provider_base64() -> None:
    """No pixel buffer: the provider's text is verified and delivered, not encoded again."""
    import tracemalloc

    data = _noisy_png()
    text = base64.b64encode(data).decode()
    provider_response = response([image_item(0, data)])
    assert provider_response.data[0].b64_json == text
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = await Materializer().materialize(provider_response, request(), None, owner="o")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.data[0].b64_json == text
    assert result.data[0].sha256 == hashlib.sha256(data).hexdigest()
    # the decoded bytes and scanline pieces beside the text; never a second text
    assert peak - before < len(data) + 4 * 1024 * 1024
    assert provider_response.data[0].b64_json is None


async def test_base64_with_stray_padding_bits_is_encoded_again() -> None:
    data = png_bytes(5, 5)
    text = base64.b64encode(data).decode()
    assert text.endswith("=")  # the last character before "=" carries unused bits
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    tail = text.rstrip("=")
    stray = tail[:-1] + alphabet[alphabet.index(tail[-1]) | 1] + text[len(tail) :]
    assert base64.b64decode(stray) == data and stray != text
    item = image_item(0, data)
    item.b64_json = stray
    result = await Materializer().materialize(response([item]), request(), None, owner="o")
    assert result.data[0].b64_json == text


@pytest.mark.parametrize(
    ("width", "height", "threaded"),
    [
        (64, 64, False),  # small file, few pixels: verified on the loop
        (2000, 2000, True),  # a tiny flat file that declares 4 Mpx: never decoded on the loop
        (300, 300, True),  # beyond the inline pixel bound
    ],
)
async def test_only_small_outputs_skip_the_worker_thread(
    monkeypatch: pytest.MonkeyPatch, width: int, height: int, threaded: bool
) -> None:
    """A thread hop costs more than verifying a small image, but a large one must never
    block the event loop — whatever its file size."""
    offloaded = worker_thread_calls(monkeypatch)
    data = png_bytes(width, height)
    result = await Materializer().materialize(
        response([image_item(0, data)]), request(), None, owner="o"
    )
    assert base64.b64decode(result.data[0].b64_json or "") == data
    assert ("inspect_image" in offloaded) is threaded, offloaded


# -- payloads the provider already decoded -----------------------------------------------------


def _decoded_item(data: bytes, verified_under: ImageLimits | None, **overrides: Any) -> Any:
    item = image_item(0, data, **overrides)
    attach_decoded(item, DecodedPayload(data, inspect_image(data), verified_under=verified_under))
    return item


def _count_inspections(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    from imagebridge.engine import verification as module

    calls: list[dict[str, Any]] = []
    real_inspect = module.inspect_image

    def inspect(payload: bytes, limits: Any, **options: Any) -> Any:
        calls.append(options)
        return real_inspect(payload, limits, **options)

    monkeypatch.setattr(module, "inspect_image", inspect)
    return calls


async def test_a_payload_fully_verified_under_the_same_limits_is_not_decoded_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = png_bytes(40, 30)
    calls = _count_inspections(monkeypatch)
    provider_response = response([_decoded_item(data, verified_under=ImageLimits())])

    result = await Materializer().materialize(provider_response, request(), None, owner="o")

    assert calls == []
    assert base64.b64decode(result.data[0].b64_json or "") == data
    assert (result.data[0].width, result.data[0].height) == (40, 30)
    assert provider_response.data[0].b64_json is None  # the text is still released


async def test_a_payload_checked_under_other_limits_is_decoded_by_the_materializer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = png_bytes(40, 30)
    calls = _count_inspections(monkeypatch)
    headers_only = response([_decoded_item(data, verified_under=None)])
    looser = response([_decoded_item(data, verified_under=ImageLimits(max_pixels=10**9))])

    for provider_response in (headers_only, looser):
        result = await Materializer().materialize(provider_response, request(), None, owner="o")
        assert base64.b64decode(result.data[0].b64_json or "") == data

    # decoded in full each time, the provider's digest of these very bytes reused
    assert calls == [{"sha256": hashlib.sha256(data).hexdigest()}] * 2
    strict = Materializer(MaterializeLimits(image=ImageLimits(max_pixels=1000)))
    with pytest.raises(BridgeError) as caught:
        await strict.materialize(
            response([_decoded_item(data, verified_under=ImageLimits())]),
            request(),
            None,
            owner="o",
        )
    assert caught.value.code is ErrorCode.ARTIFACT  # its own limits, not the provider's


async def test_a_decoded_payload_whose_declared_digest_differs_is_refused() -> None:
    data = png_bytes(40, 30)
    item = _decoded_item(data, verified_under=ImageLimits(), sha256="0" * 64)

    with pytest.raises(BridgeError) as caught:
        await Materializer().materialize(response([item]), request(), None, owner="o")

    assert caught.value.code is ErrorCode.PROTOCOL
    assert "metadata does not match" in caught.value.message
