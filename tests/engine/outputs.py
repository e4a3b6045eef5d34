"""Requests and provider answers for the materializer's tests (tests/engine/test_materialize.py
and the stages it sequences: verification, finishing, generation records, projection)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from PIL import Image

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.request import GenerationParameters, ImageRequest
from imagebridge.contract.response import BridgeErrorBody, ImageFailure, ImageResponse
from imagebridge.engine.materialize import Materializer
from tests.support.images import encoded_png


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
    return encoded_png(Image.fromarray(pixels, "RGB"))


def rgba_png(opaque_centre: bool = True, transparent_border: bool = True) -> bytes:
    pixels = np.zeros((20, 20, 4), dtype=np.uint8)
    pixels[...] = (0, 0, 0, 0 if transparent_border else 255)
    if opaque_centre:
        pixels[5:15, 5:15] = (200, 40, 40, 255)
    return encoded_png(Image.fromarray(pixels, "RGBA"))


ONE = {
    "count": {"min": 1, "max": 1},
    "batching": {"mode": "native", "native_count": {"min": 1, "max": 1}, "max_parallel_outputs": 1},
    "negative_prompt": "native",
}


def store_runtime(tmp_path: Any, provider: Any) -> Any:
    """An engine publishing to a filesystem artifact store under ``tmp_path``."""
    from imagebridge.application import StoreSink
    from imagebridge.artifacts.filesystem.store import ArtifactStore, AsyncArtifactStore
    from tests.support.runtime import make_runtime

    store = ArtifactStore(tmp_path / "artifacts")
    runtime = make_runtime(
        provider, materializer=Materializer(artifacts=StoreSink(AsyncArtifactStore(store)))
    )
    return runtime, store


def worker_thread_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions run through ``asyncio.to_thread`` from here on, in order."""
    offloaded: list[str] = []
    real_to_thread = asyncio.to_thread

    async def to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        offloaded.append(getattr(func, "__name__", repr(func)))
        return await real_to_thread(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    return offloaded
