"""Moving artifacts into the bucket from another store, and checking what is there.

``imagegen-bridge artifacts migrate`` and ``artifacts verify``
(:mod:`imagebridge.application.artifact_migration`) walk :func:`list_all` and store
another backend's artifacts with :func:`move_in`: under its own id, name, owner and
creation time, its sidecar included, the marker last. Resumable: an artifact already here
with the same SHA-256 and a verified image is left alone.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from typing import Any

from imagebridge.artifacts.markers import Marker
from imagebridge.artifacts.rules import encode_sidecar, sidecar_name
from imagebridge.artifacts.s3.markers import (
    image_key,
    list_markers,
    load_marker,
    put_marker,
    sidecar_key,
)
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.reads import read_image
from imagebridge.contract.errors import BridgeError
from imagebridge.imaging.inspect import ImageLimits, inspect_image

__all__ = ["list_all", "move_in"]


async def list_all(objects: S3ObjectStore, max_scan: int) -> tuple[list[Marker | None], bool]:
    """Up to ``max_scan`` parsed markers in key order (``None`` for an invalid one), and
    whether more exist."""
    listed, reached = await list_markers(objects, max_scan)
    return [marker for _marker_id, marker in listed], reached


async def move_in(
    objects: S3ObjectStore,
    marker: Marker,
    data: bytes,
    sidecar: Mapping[str, Any] | None,
    limits: ImageLimits,
) -> bool:
    """Store the artifact unless it is already here (``False``): image, sidecar, marker."""
    if hashlib.sha256(data).hexdigest() != marker.sha256:
        raise BridgeError.artifact("artifact bytes do not match their recorded SHA-256")
    existing = await load_marker(objects, marker.id)
    if (
        existing is not None
        and existing.sha256 == marker.sha256
        and await read_image(objects, existing, limits) is not None
    ):
        return False
    info = await asyncio.to_thread(inspect_image, data, limits)
    await objects.put(image_key(marker.id, marker.name), data, content_type=info.format.media_type)
    stored = marker.with_sidecar(None, None)
    if sidecar is not None:
        encoded = encode_sidecar(sidecar)
        await objects.put(sidecar_key(marker.id), encoded, content_type="application/json")
        stored = stored.with_sidecar(
            sidecar_name(marker.name, marker.id), hashlib.sha256(encoded).hexdigest()
        )
    await put_marker(objects, stored)
    return True
