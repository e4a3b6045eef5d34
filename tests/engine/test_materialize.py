"""Materialization, and the behaviours the original's materialize.rs tests check."""

from __future__ import annotations

import base64
import hashlib
import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.request import GenerationParameters, ImageRequest
from imagebridge.contract.response import BridgeErrorBody, ImageFailure, ImageResponse
from imagebridge.engine.decoded import DecodedPayload, attach_decoded
from imagebridge.engine.materialize import MaterializeLimits, Materializer, PublishedArtifact
from imagebridge.engine.transparency import ChromaPlan
from imagebridge.imaging.inspect import ImageLimits, inspect_image
from tests.artifacts.images import png_chunk
from tests.support.fakes import image_item, png_bytes


def request(**fields: Any) -> ImageRequest:
    body: dict[str, Any] = {"operation": "generate", "prompt": "x"}
    body.update(fields)
    return ImageRequest.model_validate(body)


def response(items: list[Any], failures: list[ImageFailure] | None = None) -> ImageResponse:
    params = GenerationParameters()
    return ImageResponse(
        id="r",
        created=1,
        provider="p",
        model="m",
        requested=params,
        effective=params,
        data=items,
        failures=failures or [],
    )


def failure(index: int) -> ImageFailure:
    return ImageFailure(
        index=index,
        error=BridgeErrorBody.from_error(BridgeError(ErrorCode.UPSTREAM, "x")),
        generation_ms=1,
    )


def keyed_fixture() -> bytes:
    """20×20 green with a 10×10 red square: the chroma statements' fixture."""
    pixels = np.zeros((20, 20, 3), dtype=np.uint8)
    pixels[:, :] = (0, 255, 0)
    pixels[5:15, 5:15] = (220, 30, 20)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="PNG")
    return buffer.getvalue()


async def test_chroma_postprocessing_is_applied_before_projection() -> None:
    plan = ChromaPlan("#00ff00", 12, 96, True)
    result = await Materializer().materialize(
        response([image_item(0, keyed_fixture())]), request(), plan, owner="o"
    )
    image = Image.open(io.BytesIO(base64.b64decode(result.data[0].b64_json or "")))
    assert image.mode == "RGBA"
    assert image.getpixel((0, 0)) == (0, 0, 0, 0)
    assert image.getpixel((10, 10)) == (220, 30, 20, 255)
    alpha = [n for n in result.normalizations if n.reason == "validated_chroma_key_alpha"]
    assert alpha and alpha[0].effective["transparent_pixels"] == 300  # type: ignore[index]
    assert result.data[0].sha256 != image_item(0, keyed_fixture()).sha256


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


async def test_rejects_outputs_that_exceed_the_aggregate_response_budget() -> None:
    items = [image_item(0, png_bytes()), image_item(1, png_bytes())]
    materializer = Materializer(MaterializeLimits(max_response_bytes=120))
    with pytest.raises(BridgeError) as caught:
        await materializer.materialize(
            response(items), request(parameters={"n": 2}), None, owner="o"
        )
    assert "aggregate response payload" in caught.value.message
    assert caught.value.details["maximum_bytes"] == 120


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


async def test_artifact_and_url_projection_use_the_sink() -> None:
    published: list[dict[str, Any]] = []

    class Sink:
        async def publish(self, data: bytes, **options: Any) -> PublishedArtifact:
            published.append(options)
            return PublishedArtifact(id="0190-id", name="portraits/woman.png")

    eff = request(
        output={"response_format": "artifact", "directory": "portraits", "filename": "woman.png"}
    )
    result = await Materializer(artifacts=Sink()).materialize(
        response([image_item(0, png_bytes())]), eff, None, owner="scope-a"
    )
    assert result.data[0].type == "artifact" and result.data[0].name == "portraits/woman.png"
    assert published[0]["owner"] == "scope-a" and published[0]["directory"] == "portraits"
    url_request = request(output={"response_format": "url"})
    with pytest.raises(BridgeError) as caught:
        await Materializer(artifacts=Sink(), links=Links()).materialize(
            response([image_item(0, png_bytes())]), url_request, None, owner="o"
        )
    assert caught.value.code is ErrorCode.CONFIGURATION  # no base address at all
    hosted = await Materializer(
        artifacts=Sink(), public_base_url="https://img.example/a/", links=Links()
    ).materialize(
        response([image_item(0, png_bytes())]),
        url_request,
        None,
        owner="o",
        link_base="http://127.0.0.1:1/",
    )
    assert hosted.data[0].url == "https://img.example/a/link/0190-id/portraits/woman.png"
    direct = await Materializer(artifacts=Sink(), links=Links()).materialize(
        response([image_item(0, png_bytes())]),
        url_request,
        None,
        owner="o",
        link_base="http://127.0.0.1:1/",
    )
    assert direct.data[0].url == "http://127.0.0.1:1/link/0190-id/portraits/woman.png"


class Links:
    async def ready(self) -> None:
        pass

    async def link(self, artifact: PublishedArtifact) -> str:
        return f"link/{artifact.id}/{artifact.name}"


async def test_artifact_delivery_needs_a_store() -> None:
    with pytest.raises(BridgeError) as caught:
        await Materializer().materialize(
            response([image_item(0, png_bytes())]),
            request(output={"response_format": "artifact"}),
            None,
            owner="o",
        )
    assert caught.value.code is ErrorCode.CONFIGURATION


async def test_mixed_dimensions_are_reported_per_image() -> None:
    items = [image_item(0, png_bytes(2, 2)), image_item(1, png_bytes(1, 1))]
    eff = request(parameters={"n": 2, "size": "2x2"})
    result = await Materializer().materialize(response(items), eff, None, owner="o")
    assert [(n.field, n.effective) for n in result.normalizations] == [("data[1].size", "1x1")]
    # the original's warning, kept for its clients, and the issue-32 one for the same fact
    assert result.warnings == [
        "provider_output_dimensions_differed",
        "provider_output_size_differed",
    ]


# -- metadata: embedded records and sidecars -----------------------------------------------


def _store_runtime(tmp_path: Any, provider: Any) -> Any:
    from imagebridge.application import StoreSink
    from imagebridge.artifacts.filesystem.store import ArtifactStore, AsyncArtifactStore
    from tests.support.runtime import make_runtime

    store = ArtifactStore(tmp_path / "artifacts")
    runtime = make_runtime(
        provider, materializer=Materializer(artifacts=StoreSink(AsyncArtifactStore(store)))
    )
    return runtime, store


ONE = {
    "count": {"min": 1, "max": 1},
    "batching": {"mode": "native", "native_count": {"min": 1, "max": 1}, "max_parallel_outputs": 1},
    "negative_prompt": "native",
}


async def test_artifact_projection_honors_per_request_placement(tmp_path: Any) -> None:
    import json

    from tests.support.fakes import FakeProvider

    runtime, store = _store_runtime(tmp_path, FakeProvider(caps=ONE))
    response = await runtime.execute(
        request(
            prompt="a woman",
            negative_prompt="blur",
            output={
                "response_format": "artifact",
                "directory": "portraits",
                "filename": "woman.png",
                "metadata": "sidecar",
            },
        )
    )
    item = response.data[0]
    assert item.name == "portraits/woman.png"
    assert (store.root / "portraits" / "woman.png").is_file()
    assert item.metadata_name == f"portraits/metadata-{item.id}.json"
    sidecar = json.loads((store.root / item.metadata_name).read_text())
    assert sidecar["original_prompt"] == "a woman"
    assert sidecar["negative_prompt"] == "blur"
    assert (sidecar["provider"], sidecar["model"]) == ("test-provider", "test-image")
    assert sidecar["image"]["artifact_name"] == "portraits/woman.png"
    assert sidecar["image"]["width"] == 1


async def test_embedded_policy_updates_payload_checksum_and_carries_generation_contract() -> None:
    from imagebridge.imaging.metadata import extract_metadata_record

    source = png_bytes(4, 4)
    item = image_item(0, source, generation_ms=41)
    resp = response([item])
    resp.timings.provider_ms = 40
    eff = request(output={"metadata": "embedded"})
    result = await Materializer().materialize(resp, eff, None, owner="o", original=eff)
    out = result.data[0]
    data = base64.b64decode(out.b64_json or "")
    record = extract_metadata_record(data)
    assert record is not None
    assert record["kind"] == "imagegen_bridge_generation"
    assert record["original_prompt"] == "x"
    assert (record["provider"], record["model"]) == ("p", "m")
    assert record["timings"]["provider_ms"] == 40
    assert record["timings"]["generation_ms"] == 41
    import hashlib

    assert out.sha256 != item.sha256
    assert out.sha256 == hashlib.sha256(data).hexdigest()
    assert Image.open(io.BytesIO(data)).tobytes() == Image.open(io.BytesIO(source)).tobytes()


async def test_combined_policy_publishes_embedded_xmp_and_matching_sidecar(tmp_path: Any) -> None:
    import hashlib

    from imagebridge.imaging.metadata import extract_metadata_record
    from tests.support.fakes import FakeProvider

    runtime, store = _store_runtime(tmp_path, FakeProvider(caps=ONE))
    response = await runtime.execute(
        request(
            prompt="a lighthouse",
            output={
                "response_format": "artifact",
                "filename": "lighthouse.png",
                "metadata": "sidecar_and_embedded",
            },
        )
    )
    item = response.data[0]
    stored = (store.root / "lighthouse.png").read_bytes()
    assert hashlib.sha256(stored).hexdigest() == item.sha256
    record = extract_metadata_record(stored)
    assert record is not None and record["original_prompt"] == "a lighthouse"
    assert item.metadata_name is not None and (store.root / item.metadata_name).is_file()


async def test_embedded_record_reports_optional_fields_omitted_for_container_portability() -> None:
    from imagebridge.imaging.metadata import extract_metadata_record

    resp = response([image_item(0, png_bytes(4, 4))])
    resp.revised_prompt = "r" * 50 * 1024
    eff = request(output={"metadata": "embedded"})
    result = await Materializer().materialize(resp, eff, None, owner="o", original=eff)
    data = base64.b64decode(result.data[0].b64_json or "")
    record = extract_metadata_record(data)
    assert record is not None
    assert "revised_prompt" not in record
    assert "revised_prompt" in record["omitted_fields"]
    import json

    assert len(json.dumps(record, separators=(",", ":"))) <= 40 * 1024


def _noisy_png() -> bytes:
    noisy = np.random.default_rng(3).integers(0, 256, (700, 700, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(noisy, "RGB").save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


async def test_the_provider_base64_is_released_before_pixels_are_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Peak memory: the base64 text (1.33x the image) must not live beside its pixels."""
    import tracemalloc

    from imagebridge.engine import materialize as module

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
    from imagebridge.engine import materialize as module

    offloaded: list[str] = []
    real_to_thread = module.asyncio.to_thread

    async def to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        offloaded.append(getattr(func, "__name__", repr(func)))
        return await real_to_thread(func, *args, **kwargs)

    monkeypatch.setattr(module.asyncio, "to_thread", to_thread)
    data = png_bytes(width, height)
    result = await Materializer().materialize(
        response([image_item(0, data)]), request(), None, owner="o"
    )
    assert base64.b64decode(result.data[0].b64_json or "") == data
    assert ("inspect_image" in offloaded) is threaded, offloaded


# -- the output set and each image are checked, nothing trusted ---------------------------------


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


async def test_another_format_than_negotiated_is_reencoded_and_reported() -> None:
    """Issue 32: the original refused it (a protocol error after a billed call); the
    bridge now delivers the format asked for and says the transport made another."""
    result = await Materializer().materialize(
        response([image_item(0, png_bytes(4, 3))]),
        request(parameters={"output_format": "webp"}),
        None,
        owner="o",
    )
    [item] = result.data
    assert item.format.value == "webp" and (item.width, item.height) == (4, 3)
    assert inspect_image(base64.b64decode(item.b64_json or "")).format.value == "webp"
    [note] = result.normalizations
    assert (note.field, note.requested, note.effective, note.reason) == (
        "data[0].format",
        "webp",
        {"provider": "png", "delivered": "webp"},
        "provider_output_format_reencoded",
    )
    assert result.warnings == ["provider_output_format_differed"]


def jpeg_bytes(quality: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (30, 140, 220)).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


async def test_a_jpeg_quality_other_than_asked_is_reported() -> None:
    eff = request(parameters={"output_format": "jpeg", "output_compression": 90})
    result = await Materializer().materialize(
        response([image_item(0, jpeg_bytes(60), "jpeg")]), eff, None, owner="o"
    )
    [note] = result.normalizations
    assert (note.field, note.requested, note.effective, note.reason) == (
        "data[0].output_compression",
        90,
        60,
        "provider_output_quality_differed",
    )
    assert result.warnings == ["provider_output_quality_differed"]
    honoured = await Materializer().materialize(
        response([image_item(0, jpeg_bytes(90), "jpeg")]), eff, None, owner="o"
    )
    assert honoured.normalizations == [] and honoured.warnings == []


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


# -- transparency: chroma key or native alpha ----------------------------------------------------


async def test_the_chroma_key_is_sampled_from_the_actual_border() -> None:
    plan = ChromaPlan("#ff00ff", 12, 96, True)  # planned magenta, the provider painted green
    result = await Materializer().materialize(
        response([image_item(0, keyed_fixture())]), request(), plan, owner="o"
    )
    [key] = [n for n in result.normalizations if n.field == "data[0].transparency.key_color"]
    assert (key.requested, key.effective, key.reason) == (
        "#ff00ff",
        "#00ff00",
        "sampled_provider_output_border",
    )
    [alpha] = [n for n in result.normalizations if n.field == "data[0].transparency.alpha"]
    assert alpha.requested is None
    assert alpha.effective == {
        "total_pixels": 400,
        "transparent_pixels": 300,
        "partial_pixels": 0,
        "opaque_pixels": 100,
        "transparent_corners": 4,
    }


async def test_a_chroma_failure_is_an_artifact_error_naming_the_stage() -> None:
    plan = ChromaPlan("#00ff00", 12, 96, True)
    white = png_bytes(20, 20, color=(255, 255, 255))
    with pytest.raises(BridgeError) as caught:
        await Materializer().materialize(
            response([image_item(0, white)]), request(), plan, owner="o"
        )
    error = caught.value
    assert (error.code, error.message) == (
        ErrorCode.ARTIFACT,
        "provider output image failed independent verification",
    )
    assert error.details["stage"] == "transparent_background"


def rgba_png(opaque_centre: bool = True, transparent_border: bool = True) -> bytes:
    pixels = np.zeros((20, 20, 4), dtype=np.uint8)
    pixels[...] = (0, 0, 0, 0 if transparent_border else 255)
    if opaque_centre:
        pixels[5:15, 5:15] = (200, 40, 40, 255)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGBA").save(buffer, format="PNG")
    return buffer.getvalue()


async def test_native_transparency_is_validated_without_the_corner_rule() -> None:
    eff = request(parameters={"background": "transparent"})
    result = await Materializer().materialize(
        response([image_item(0, rgba_png())]), eff, None, owner="o"
    )
    [alpha] = result.normalizations
    assert (alpha.field, alpha.reason) == ("data[0].transparency.alpha", "validated_native_alpha")
    assert alpha.effective["transparent_pixels"] == 300  # type: ignore[index]
    with pytest.raises(BridgeError) as caught:  # a provider that ignored transparency
        await Materializer().materialize(
            response([image_item(0, rgba_png(transparent_border=False))]), eff, None, owner="o"
        )
    assert caught.value.code is ErrorCode.ARTIFACT
    assert caught.value.details["stage"] == "transparent_background"


async def test_pixel_work_runs_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from imagebridge.engine import materialize as module

    offloaded: list[str] = []
    real_to_thread = module.asyncio.to_thread

    async def to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        offloaded.append(getattr(func, "__name__", repr(func)))
        return await real_to_thread(func, *args, **kwargs)

    monkeypatch.setattr(module.asyncio, "to_thread", to_thread)
    plan = ChromaPlan("#00ff00", 12, 96, True)
    await Materializer().materialize(
        response([image_item(0, keyed_fixture())]), request(), plan, owner="o"
    )
    assert "remove_background" in offloaded
    eff = request(parameters={"background": "transparent"}, output={"metadata": "embedded"})
    await Materializer().materialize(
        response([image_item(0, rgba_png())]), eff, None, owner="o", original=eff
    )
    assert "inspect_transparent_alpha" in offloaded
    assert "embed" in offloaded  # the XMP container is rebuilt and re-verified off the loop


# -- dimensions and projection (response_format) ------------------------------------------------


async def test_uniformly_different_dimensions_change_the_effective_size() -> None:
    items = [image_item(0, png_bytes(3, 2)), image_item(1, png_bytes(3, 2))]
    eff = request(parameters={"n": 2, "size": "2x2"}, policies={"compatibility": "strict"})
    resp = response(items)
    result = await Materializer().materialize(resp, eff, None, owner="o")
    assert result.effective.size == "3x2"
    [change] = result.normalizations
    assert (change.field, change.requested, change.effective, change.reason) == (
        "parameters.size",
        "2x2",
        "3x2",
        "provider_output_dimensions_differed",
    )
    # the original's warning, kept for its clients, and the issue-32 one for the same fact
    assert result.warnings == [
        "provider_output_dimensions_differed",
        "provider_output_size_differed",
    ]
    same = await Materializer().materialize(
        response([image_item(0, png_bytes(2, 2))]),
        request(parameters={"size": "2x2"}),
        None,
        owner="o",
    )
    assert same.normalizations == [] and same.warnings == []


async def test_metadata_projection_has_no_payload_but_every_measured_field() -> None:
    data = png_bytes(5, 4)
    result = await Materializer().materialize(
        response([image_item(0, data, generation_ms=9)]),
        request(output={"response_format": "metadata"}),
        None,
        owner="o",
    )
    [item] = result.data
    assert item.type == "metadata"
    assert (item.b64_json, item.url, item.id, item.name) == (None, None, None, None)
    assert (item.width, item.height, item.bytes, item.generation_ms) == (5, 4, len(data), 9)
    import hashlib

    assert item.sha256 == hashlib.sha256(data).hexdigest()


# -- sidecars ------------------------------------------------------------------------------------


async def test_sidecars_need_a_store_and_named_artifact_outputs() -> None:
    eff = request(output={"response_format": "artifact", "metadata": "sidecar"})
    resp = response([image_item(0, png_bytes())])
    with pytest.raises(BridgeError) as caught:
        await Materializer().attach_sidecars(resp, eff, eff)
    assert caught.value.code is ErrorCode.CONFIGURATION

    class Sink:
        async def publish(self, data: bytes, **options: Any) -> PublishedArtifact:
            raise AssertionError("not called")

        async def attach_metadata(self, artifact_id: str, name: str, record: Any) -> str:
            raise AssertionError("a b64 output has no artifact to attach to")

    with pytest.raises(BridgeError) as caught:
        await Materializer(artifacts=Sink()).attach_sidecars(resp, eff, eff)
    assert (caught.value.code, caught.value.message) == (
        ErrorCode.PROTOCOL,
        "metadata sidecars require named artifact outputs",
    )
    plain = request()
    assert await Materializer().attach_sidecars(resp, plain, plain) is resp


def _decoded_item(data: bytes, verified_under: ImageLimits | None, **overrides: Any) -> Any:
    item = image_item(0, data, **overrides)
    attach_decoded(item, DecodedPayload(data, inspect_image(data), verified_under=verified_under))
    return item


def _count_inspections(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    from imagebridge.engine import materialize as module

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


async def test_see_through_pixels_in_an_image_asked_opaque_are_reported() -> None:
    rgba = np.zeros((4, 4, 4), dtype=np.uint8)
    rgba[..., 3] = 255
    rgba[0, :2, 3] = 0  # two see-through pixels
    buffer = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buffer, format="PNG")
    eff = request(parameters={"background": "opaque"})
    result = await Materializer().materialize(
        response([image_item(0, buffer.getvalue())]), eff, None, owner="o"
    )
    [note] = result.normalizations
    assert (note.field, note.requested, note.effective, note.reason) == (
        "data[0].background",
        "opaque",
        {"see_through_pixels": 2},
        "provider_output_background_differed",
    )
    assert result.warnings == ["provider_output_background_differed"]
    rgba[..., 3] = 255
    solid = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(solid, format="PNG")
    clean = await Materializer().materialize(
        response([image_item(0, solid.getvalue())]), eff, None, owner="o"
    )
    assert clean.normalizations == [] and clean.warnings == []
