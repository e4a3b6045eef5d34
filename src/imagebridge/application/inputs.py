"""Configuration → image bounds, remote fetch policies and the engine's input port.

The lower layers take plain values (:class:`ImageLimits`, :class:`RemoteFetchPolicy`); the
conversions from the ``[artifacts.image]``, ``[inputs.remote]`` and
``[artifacts.remote_output]`` tables live here. :func:`build_input_loader` makes the one
input loader the engine loads every request's input images through: local files under
``inputs.local_roots``, URLs under ``[inputs.remote]``, inline payloads within
``runtime.request.max_inline_encoded_bytes``, every image held to ``[artifacts.image]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.artifacts.inputs.remote import RemoteFetchPolicy, RemoteImageFetcher
from imagebridge.config.model import BridgeConfig, ImageLimitSettings, RemoteFetchSettings
from imagebridge.contract.request import ImageInput
from imagebridge.engine.inputs import ImageInputLoader, LoadedImage
from imagebridge.imaging.inspect import ImageLimits

__all__ = [
    "build_input_loader",
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


class _DeferredInputLoader:
    """An :class:`InputLoader` built on first use.

    Building it checks that every local root is a directory; a configured root that is
    missing is then the ``configuration`` error of the first request with an input, and
    never stops the bridge from starting (requests without inputs never need a root).
    """

    def __init__(self, build: Callable[[], InputLoader]) -> None:
        self._build = build
        self._loader: InputLoader | None = None

    def __repr__(self) -> str:
        return f"_DeferredInputLoader(built={self._loader is not None})"

    async def aload_input(self, value: ImageInput, /) -> LoadedImage:
        loader = self._loader
        if loader is None:  # two first calls may both build one: same result, no harm
            loader = self._loader = await asyncio.to_thread(self._build)
        return await loader.aload_input(value)


def build_input_loader(config: BridgeConfig) -> ImageInputLoader:
    """The engine's input port for ``config`` (the one loader of every provider's inputs)."""
    limits = image_limits(config)
    inputs = config.inputs
    max_inline = config.runtime.request.max_inline_encoded_bytes

    def build() -> InputLoader:
        policy = remote_fetch_policy(inputs.remote, max_bytes=limits.max_encoded_bytes)
        return InputLoader(
            inputs.local_roots,
            limits,
            remote=RemoteImageFetcher(policy, limits),
            max_inline_encoded_bytes=max_inline,
        )

    return _DeferredInputLoader(build)
