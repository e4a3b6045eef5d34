"""Where the S3 store keeps its ownership markers, and what each marker names in the bucket.

Under the object store's key prefix::

    ownership/<id>.json          the marker (the filesystem store's format, ≤ 4 KiB)
    images/<id>/<name>           the image
    metadata/<id>.json           the optional sidecar (≤ 1 MiB JSON object)

An object becomes part of an artifact only once the marker naming it is stored after it
(:func:`put_with_marker`): a marker that cannot be stored takes its object away again, so
a reader never meets a marker whose object was never written.
"""

from __future__ import annotations

import asyncio
import contextlib

from imagebridge.artifacts.markers import MAX_MARKER_BYTES, Marker, parse_marker
from imagebridge.artifacts.s3.errors import write_fault
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.contract.errors import BridgeError
from imagebridge.engine.crash_points import crash_point

__all__ = [
    "IMAGES",
    "METADATA",
    "OWNERSHIP",
    "image_key",
    "list_markers",
    "load_marker",
    "marker_key",
    "put_marker",
    "put_with_marker",
    "sidecar_key",
]

OWNERSHIP = "ownership/"
IMAGES = "images/"
METADATA = "metadata/"


def marker_key(marker_id: str) -> str:
    return f"{OWNERSHIP}{marker_id}.json"


def image_key(marker_id: str, name: str) -> str:
    return f"{IMAGES}{marker_id}/{name}"


def sidecar_key(marker_id: str) -> str:
    return f"{METADATA}{marker_id}.json"


async def put_marker(objects: S3ObjectStore, marker: Marker) -> None:
    """Store ``marker`` (replacing the one of the same id)."""
    encoded = marker.encode()
    if len(encoded) > MAX_MARKER_BYTES:
        raise BridgeError.artifact("artifact ownership record is too large")
    await objects.put(marker_key(marker.id), encoded, content_type="application/json")


async def load_marker(objects: S3ObjectStore, marker_id: str) -> Marker | None:
    """The strictly valid marker of ``marker_id``, else ``None`` (a store that does not
    answer is an error, never "absent")."""
    encoded = await objects.get_bytes(marker_key(marker_id), MAX_MARKER_BYTES)
    return None if encoded is None else parse_marker(encoded, f"{marker_id}.json")


async def list_markers(
    objects: S3ObjectStore, limit: int
) -> tuple[list[tuple[str, Marker | None]], bool]:
    """Up to ``limit`` (marker id, parsed marker or ``None``) in key order, and whether
    more exist."""
    listed = await objects.list_objects(OWNERSHIP, limit=limit + 1)
    found: list[tuple[str, Marker | None]] = []
    for item in listed[:limit]:
        marker_id = item.key[len(OWNERSHIP) :].removesuffix(".json")
        found.append((marker_id, await load_marker(objects, marker_id)))
    return found, len(listed) > limit


async def put_with_marker(
    objects: S3ObjectStore,
    key: str,
    data: bytes,
    *,
    content_type: str,
    step: str,
    marker: Marker,
) -> None:
    """Store ``data`` at ``key``, then ``marker`` vouching for it; when the marker cannot
    be stored the object is removed again. Failures the bucket caused are storage faults
    (:func:`~imagebridge.artifacts.s3.errors.write_fault`); ``step`` names the crash point
    between the two."""
    try:
        await objects.put(key, data, content_type=content_type)
    except BridgeError as error:
        raise write_fault(error) from error
    crash_point(step)
    try:
        await put_marker(objects, marker)
    except BaseException as exc:
        with contextlib.suppress(BridgeError):
            await asyncio.shield(objects.delete(key))
        if isinstance(exc, BridgeError):
            raise write_fault(exc) from exc
        raise
