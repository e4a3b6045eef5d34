"""The generation record: embedded as XMP, written as a sidecar beside each artifact."""

from __future__ import annotations

import base64
import hashlib
import io
from typing import Any

import pytest
from PIL import Image

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.engine.materialize import Materializer
from imagebridge.engine.publishing import Publication, PublishedArtifact
from tests.engine.outputs import ONE, request, response, store_runtime
from tests.support.fakes import image_item
from tests.support.images import png_bytes

# -- embedded ----------------------------------------------------------------------------------


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
    assert out.sha256 != item.sha256
    assert out.sha256 == hashlib.sha256(data).hexdigest()
    assert Image.open(io.BytesIO(data)).tobytes() == Image.open(io.BytesIO(source)).tobytes()


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


# -- sidecars ----------------------------------------------------------------------------------


async def test_combined_policy_publishes_embedded_xmp_and_matching_sidecar(tmp_path: Any) -> None:

    from imagebridge.imaging.metadata import extract_metadata_record
    from tests.support.fakes import FakeProvider

    runtime, store = store_runtime(tmp_path, FakeProvider(caps=ONE))
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


async def test_sidecars_need_a_store_and_named_artifact_outputs() -> None:
    eff = request(output={"response_format": "artifact", "metadata": "sidecar"})
    resp = response([image_item(0, png_bytes())])
    with pytest.raises(BridgeError) as caught:
        await Materializer().attach_sidecars(resp, eff, eff)
    assert caught.value.code is ErrorCode.CONFIGURATION

    class Sink:
        async def publish(self, publication: Publication) -> PublishedArtifact:
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
