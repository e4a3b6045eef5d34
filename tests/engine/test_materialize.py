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
