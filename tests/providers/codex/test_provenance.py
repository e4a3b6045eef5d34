"""Provenance: Codex PNGs carry a C2PA manifest (``caBX``); the bridge
delivers the upstream's bytes untouched unless the caller asks for embedded metadata,
and then says that the manifest no longer matches."""

from __future__ import annotations

import base64
import hashlib

from imagebridge.contract.enums import OutputFormat
from imagebridge.imaging.metadata import extract_metadata_record, has_c2pa_manifest
from tests.support.codex_backend import CodexBridge, _image_b64, with_c2pa_chunk

UPSTREAM = base64.b64decode(with_c2pa_chunk(_image_b64(64, 64, "png", False)))


async def test_delivered_bytes_are_the_upstreams_by_default(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.c2pa = True

    response = await codex_bridge.run()

    [image] = response.data
    delivered = base64.b64decode(image.b64_json or "")
    assert delivered == UPSTREAM  # byte-identical: the C2PA binding still holds
    assert image.sha256 == hashlib.sha256(UPSTREAM).hexdigest()
    assert has_c2pa_manifest(delivered, OutputFormat.PNG)
    assert "c2pa_manifest_invalidated" not in response.warnings


async def test_embedded_metadata_is_opt_in_and_says_it_breaks_the_manifest(
    codex_bridge: CodexBridge,
) -> None:
    codex_bridge.backend.c2pa = True

    response = await codex_bridge.run(output={"metadata": "embedded"})

    [image] = response.data
    delivered = base64.b64decode(image.b64_json or "")
    assert delivered != UPSTREAM
    assert extract_metadata_record(delivered) is not None
    assert "c2pa_manifest_invalidated" in response.warnings


async def test_no_warning_when_there_was_no_manifest(codex_bridge: CodexBridge) -> None:
    response = await codex_bridge.run(output={"metadata": "embedded"})

    assert "c2pa_manifest_invalidated" not in response.warnings


def test_manifests_are_recognised_per_container() -> None:
    assert has_c2pa_manifest(UPSTREAM, OutputFormat.PNG)
    plain = base64.b64decode(_image_b64(8, 8, "png", False))
    assert not has_c2pa_manifest(plain, OutputFormat.PNG)
    assert not has_c2pa_manifest(b"not a png", OutputFormat.PNG)
    jpeg = base64.b64decode(_image_b64(8, 8, "jpeg", False))
    body = b"JP\x00\x00\x00\x00\x00\x01\x00\x00\x00\x20jumb"
    with_app11 = jpeg[:2] + b"\xff\xeb" + (len(body) + 2).to_bytes(2, "big") + body + jpeg[2:]
    assert has_c2pa_manifest(with_app11, OutputFormat.JPEG)
    assert not has_c2pa_manifest(jpeg, OutputFormat.JPEG)
    webp = base64.b64decode(_image_b64(8, 8, "webp", False))
    assert not has_c2pa_manifest(webp, OutputFormat.WEBP)
