"""Materialization (runtime.md §1.9 and the materialize.rs statements)."""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.request import GenerationParameters, ImageRequest
from imagebridge.contract.response import BridgeErrorBody, ImageFailure, ImageResponse
from imagebridge.engine.materialize import MaterializeLimits, Materializer, PublishedArtifact
from imagebridge.engine.transparency import ChromaPlan
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
        await Materializer(artifacts=Sink()).materialize(
            response([image_item(0, png_bytes())]), url_request, None, owner="o"
        )
    assert caught.value.code is ErrorCode.CONFIGURATION
    hosted = await Materializer(
        artifacts=Sink(), public_base_url="https://img.example/a/"
    ).materialize(response([image_item(0, png_bytes())]), url_request, None, owner="o")
    assert hosted.data[0].url == "https://img.example/a/portraits/woman.png"


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
    assert result.warnings == ["provider_output_dimensions_differed"]


# -- metadata: embedded records and sidecars -----------------------------------------------


def _store_runtime(tmp_path: Any, provider: Any) -> Any:
    from imagebridge.application import StoreSink
    from imagebridge.artifacts.store import ArtifactStore
    from tests.support.runtime import make_runtime

    store = ArtifactStore(tmp_path / "artifacts")
    runtime = make_runtime(provider, materializer=Materializer(artifacts=StoreSink(store)))
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
    from imagebridge.artifacts.metadata import extract_metadata_record

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

    from imagebridge.artifacts.metadata import extract_metadata_record
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
    from imagebridge.artifacts.metadata import extract_metadata_record

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


async def test_the_provider_base64_is_released_before_the_pixels_are_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Peak memory: the base64 text (1.33x the image) must not live during verification."""
    import tracemalloc

    from imagebridge.engine import materialize as module

    noisy = np.random.default_rng(3).integers(0, 256, (700, 700, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(noisy, "RGB").save(buffer, format="PNG", compress_level=1)
    data = buffer.getvalue()
    text_bytes = len(base64.b64encode(data))
    seen: list[int] = []
    real_inspect = module.inspect_image

    def inspect(payload: bytes, limits: Any) -> Any:
        seen.append(tracemalloc.get_traced_memory()[0])
        return real_inspect(payload, limits)

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
