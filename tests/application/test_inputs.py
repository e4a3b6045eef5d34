"""Configuration → image bounds, remote fetch policies and the engine's input loader."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from imagebridge.application import build_application
from imagebridge.application.inputs import image_limits_from, remote_fetch_policy
from imagebridge.artifacts.inputs.remote import RemoteFetchPolicy
from imagebridge.config import load_config
from imagebridge.config.model import ImageLimitSettings, RemoteFetchSettings
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.imaging.inspect import ImageLimits, inspect_image
from tests.artifacts.images import png

MOCK_ONLY = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
]


def test_limits_are_the_configured_bounds() -> None:
    settings = ImageLimitSettings(
        max_encoded_bytes=1_000, max_edge=64, max_pixels=4_096, max_decode_alloc=16_384
    )
    limits = image_limits_from(settings)
    assert limits == ImageLimits(
        max_encoded_bytes=1_000, max_edge=64, max_pixels=4_096, max_decode_alloc=16_384
    )
    assert image_limits_from(ImageLimitSettings()) == ImageLimits()
    with pytest.raises(BridgeError) as refused:
        inspect_image(png(65, 1), limits)
    assert refused.value.code is ErrorCode.INPUT


def test_a_policy_carries_every_key_and_the_callers_byte_bound() -> None:
    settings = RemoteFetchSettings(
        enabled=True,
        allowed_hosts=["Images.Example"],
        allowed_ports=[8443],
        allow_private_networks=True,
        max_redirects=5,
        timeout_ms=1_234,
        max_url_bytes=2_048,
    )
    policy = remote_fetch_policy(settings, max_bytes=4_096)
    assert policy == RemoteFetchPolicy(
        enabled=True,
        allowed_hosts=frozenset({"images.example"}),
        allowed_ports=frozenset({8443}),
        allow_private_networks=True,
        max_redirects=5,
        timeout_ms=1_234,
        max_url_bytes=2_048,
        max_bytes=4_096,
    )
    assert remote_fetch_policy(RemoteFetchSettings(), max_bytes=1) == RemoteFetchPolicy(max_bytes=1)
    with pytest.raises(BridgeError) as refused:
        remote_fetch_policy(RemoteFetchSettings(enabled=True, allowed_ports=[]), max_bytes=1)
    assert refused.value.code is ErrorCode.CONFIGURATION


async def test_a_missing_root_fails_the_first_request_with_an_input_not_the_start(
    tmp_path: Path,
) -> None:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    sets = [*MOCK_ONLY, f'inputs.local_roots=["{tmp_path / "missing"}"]']
    app = build_application(load_config(env=env, sets=sets, cwd=tmp_path).config)
    try:
        generate = {"operation": "generate", "prompt": "p", "parameters": {"size": "8x8"}}
        await app.runtime.execute(ImageRequest.model_validate(generate))
        inline = {"type": "base64", "data": base64.b64encode(png(8, 8)).decode()}
        edit = {**generate, "operation": "edit", "images": [inline]}
        with pytest.raises(BridgeError) as caught:
            await app.runtime.execute(ImageRequest.model_validate(edit))
    finally:
        await app.aclose()
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.details["field"] == "inputs.local_roots"
