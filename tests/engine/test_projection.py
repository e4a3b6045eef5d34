"""Projection: the delivered item for each ``response_format``, through the artifact ports."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.engine.materialize import Materializer
from imagebridge.engine.publishing import Publication, PublishedArtifact
from tests.engine.outputs import ONE, request, response, store_runtime
from tests.support.fakes import image_item
from tests.support.images import png_bytes

# -- b64_json and metadata ---------------------------------------------------------------------


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
    assert item.sha256 == hashlib.sha256(data).hexdigest()


# -- artifact and url --------------------------------------------------------------------------


async def test_artifact_and_url_projection_use_the_sink() -> None:
    published: list[dict[str, Any]] = []

    class Sink:
        async def publish(self, publication: Publication) -> PublishedArtifact:
            published.append(publication)
            return PublishedArtifact(id="0190-id", name="portraits/woman.png")

    eff = request(
        output={"response_format": "artifact", "directory": "portraits", "filename": "woman.png"}
    )
    result = await Materializer(artifacts=Sink()).materialize(
        response([image_item(0, png_bytes())]), eff, None, owner="scope-a"
    )
    assert result.data[0].type == "artifact" and result.data[0].name == "portraits/woman.png"
    assert published[0].owner == "scope-a" and published[0].directory == "portraits"
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


async def test_artifact_projection_honors_per_request_placement(tmp_path: Any) -> None:
    import json

    from tests.support.fakes import FakeProvider

    runtime, store = store_runtime(tmp_path, FakeProvider(caps=ONE))
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
