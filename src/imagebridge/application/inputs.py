"""Configuration → the image bounds and remote fetch policies the lower layers take.

The lower layers take plain values (:class:`ImageLimits`, :class:`RemoteFetchPolicy`); the
conversions from the ``[artifacts.image]``, ``[inputs.remote]`` and
``[artifacts.remote_output]`` tables live here.
"""

from __future__ import annotations

from imagebridge.artifacts.remote import RemoteFetchPolicy
from imagebridge.config.model import BridgeConfig, ImageLimitSettings, RemoteFetchSettings
from imagebridge.imaging.inspect import ImageLimits

__all__ = [
    "image_limits",
    "image_limits_from",
    "remote_fetch_policy",
]


def image_limits_from(settings: ImageLimitSettings) -> ImageLimits:
    """The limits an ``[artifacts.image]`` table describes."""
    return ImageLimits(
        max_encoded_bytes=settings.max_encoded_bytes,
        max_edge=settings.max_edge,
        max_pixels=settings.max_pixels,
        max_decode_alloc=settings.max_decode_alloc,
    )


def image_limits(config: BridgeConfig) -> ImageLimits:
    """The ``[artifacts.image]`` bounds every encoded image is held to."""
    return image_limits_from(config.artifacts.image)


def remote_fetch_policy(settings: RemoteFetchSettings, *, max_bytes: int) -> RemoteFetchPolicy:
    """The policy an ``[inputs.remote]`` or ``[artifacts.remote_output]`` table describes.

    The tables carry no byte bound of their own: ``max_bytes`` is the image bound
    (``artifacts.image.max_encoded_bytes``) of the caller that fetches.
    """
    return RemoteFetchPolicy(
        enabled=settings.enabled,
        allowed_hosts=frozenset(settings.allowed_hosts),
        allowed_ports=frozenset(settings.allowed_ports),
        allow_private_networks=settings.allow_private_networks,
        max_redirects=settings.max_redirects,
        timeout_ms=settings.timeout_ms,
        max_url_bytes=settings.max_url_bytes,
        max_bytes=max_bytes,
    )
