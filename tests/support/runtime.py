"""Build an ImageRuntime around test providers."""

from __future__ import annotations

from typing import Any

from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.engine.inputs import ImageInputLoader
from imagebridge.engine.materialize import Materializer
from imagebridge.engine.provider import Provider
from imagebridge.engine.registry import ProviderRegistry
from imagebridge.engine.runtime import ImageRuntime, ImageRuntimeSettings


def make_runtime(
    *providers: Provider,
    default: str | None = None,
    materializer: Materializer | None = None,
    inputs: ImageInputLoader | None = None,
    **settings: Any,
) -> ImageRuntime:
    """``inputs`` defaults to a loader of inline inputs only (no local roots, no URLs)."""
    registry = ProviderRegistry(providers, default=default or providers[0].name)
    return ImageRuntime(
        registry,
        materializer or Materializer(),
        ImageRuntimeSettings(**settings),
        inputs=inputs if inputs is not None else InputLoader([]),
    )
