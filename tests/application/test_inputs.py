"""Configuration → the image bounds and remote fetch policies the lower layers take."""

from __future__ import annotations

import pytest

from imagebridge.application.inputs import image_limits_from, remote_fetch_policy
from imagebridge.artifacts.remote import RemoteFetchPolicy
from imagebridge.config.model import ImageLimitSettings, RemoteFetchSettings
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import ImageLimits, inspect_image
from tests.artifacts.images import png


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
