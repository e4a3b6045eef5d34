"""Reading an artifact back from the bucket: only what its marker vouches for.

A read checks the owner scope, the image's SHA-256 and format and the sidecar's SHA-256;
an unknown, foreign or altered artifact is the one "not found or is invalid" answer of
:mod:`imagebridge.artifacts.rules`. An unreachable store is *not* "not found": it is
``store_unavailable`` (retryable), so a client retries instead of believing the image is
gone.
"""

from __future__ import annotations

import asyncio
import hashlib

from imagebridge.artifacts.markers import Marker
from imagebridge.artifacts.records import ArtifactContent
from imagebridge.artifacts.rules import is_json_object, not_found, require_id
from imagebridge.artifacts.s3.markers import image_key, load_marker, sidecar_key
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.response import MAX_SIDECAR_BYTES
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, inspect_image

__all__ = ["owned_marker", "read_content", "read_image", "sidecar_bytes"]


async def read_image(
    objects: S3ObjectStore, marker: Marker, limits: ImageLimits
) -> tuple[bytes, ImageInfo] | None:
    """The image's bytes if they are exactly what was published, else ``None``."""
    data = await objects.get_bytes(image_key(marker.id, marker.name), limits.max_encoded_bytes)
    if data is None:
        return None

    def verify() -> ImageInfo | None:
        if hashlib.sha256(data).hexdigest() != marker.sha256:
            return None
        try:
            return inspect_image(data, limits)
        except BridgeError:
            return None

    info = await asyncio.to_thread(verify)
    return None if info is None else (data, info)


async def sidecar_bytes(objects: S3ObjectStore, marker: Marker) -> bytes | None:
    """The recorded sidecar if present and unchanged, else ``None``."""
    encoded = await objects.get_bytes(sidecar_key(marker.id), MAX_SIDECAR_BYTES)
    if encoded is None:
        return None
    if hashlib.sha256(encoded).hexdigest() != marker.sidecar_sha256 or not is_json_object(encoded):
        return None
    return encoded


async def owned_marker(objects: S3ObjectStore, artifact_id: str, owner: str | None) -> Marker:
    """The marker of ``artifact_id`` if ``owner`` may see it, else "not found"."""
    marker = await load_marker(objects, require_id(artifact_id))
    if marker is None or not marker.visible_to(owner):
        raise not_found()
    return marker


async def read_content(
    objects: S3ObjectStore, artifact_id: str, owner: str | None, limits: ImageLimits
) -> ArtifactContent:
    """Verified bytes of an artifact ``owner`` may see, with its sidecar (if any) unchanged."""
    marker = await owned_marker(objects, artifact_id, owner)
    loaded = await read_image(objects, marker, limits)
    if loaded is None:
        raise not_found()
    if marker.sidecar_name is not None and await sidecar_bytes(objects, marker) is None:
        raise not_found()
    data, info = loaded
    return ArtifactContent(marker.id, marker.name, data, info, marker.sidecar_name)
