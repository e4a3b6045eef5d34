"""Crash leftovers in the bucket: objects no marker names, and incomplete multipart uploads.

A process killed between an image (or sidecar) and the marker naming it leaves an object
no marker names; one killed during a multipart upload leaves an upload that was neither
completed nor aborted (invisible: S3 shows an object only once completed). Cleanup and
repair remove such objects once older than the grace (the same as the filesystem twin's
temp files, :mod:`imagebridge.artifacts.rules`), and abort uploads older than
``stale_upload_secs`` (longer than any live upload on any instance).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from imagebridge.artifacts.markers import Marker
from imagebridge.artifacts.s3.markers import IMAGES, METADATA, load_marker
from imagebridge.artifacts.s3.objects import IncompleteUpload, ObjectInfo, S3ObjectStore
from imagebridge.imaging.ids import canonical_uuid

__all__ = ["DEFAULT_STALE_UPLOAD_SECS", "LeftoverSweep", "abort_stale_uploads", "sweep_unowned"]

DEFAULT_STALE_UPLOAD_SECS = 24 * 60 * 60


@dataclass(frozen=True, slots=True)
class LeftoverSweep:
    found: int
    removed: int
    limit_reached: bool


async def sweep_unowned(
    objects: S3ObjectStore,
    cutoff: float,
    limit: int,
    *,
    apply: bool,
    clock: Callable[[], float],
    stale_upload_secs: int,
) -> LeftoverSweep:
    """Objects no marker names last changed before ``cutoff``, and uploads started
    ``stale_upload_secs`` ago by ``clock``: found, and with ``apply`` removed."""
    found = removed = 0
    images = await objects.list_objects(IMAGES, limit=limit + 1)
    sidecars = await objects.list_objects(METADATA, limit=limit + 1)
    reached = len(images) > limit or len(sidecars) > limit
    markers: dict[str, Marker | None] = {}

    async def marker_of(marker_id: str) -> Marker | None:
        if marker_id not in markers:
            canonical = canonical_uuid(marker_id)
            markers[marker_id] = (
                await load_marker(objects, canonical) if canonical == marker_id else None
            )
        return markers[marker_id]

    async def consider(item: ObjectInfo, owned: bool) -> None:
        nonlocal found, removed
        if owned or item.last_modified > cutoff:
            return
        found += 1
        if apply:
            await objects.delete(item.key)
            removed += 1

    for item in images[:limit]:
        marker_id, _, rest = item.key[len(IMAGES) :].partition("/")
        marker = await marker_of(marker_id)
        await consider(item, marker is not None and rest == marker.name)
    for item in sidecars[:limit]:
        marker_id = item.key[len(METADATA) :].removesuffix(".json")
        marker = await marker_of(marker_id)
        await consider(item, marker is not None and marker.sidecar_name is not None)
    uploads = await objects.incomplete_uploads(limit=limit)
    now = clock()
    stale = [u for u in uploads if now - u.initiated >= stale_upload_secs]
    found += len(stale)
    if apply:
        removed += await _abort_all(objects, stale)
    return LeftoverSweep(found, removed, reached or len(uploads) >= limit)


async def abort_stale_uploads(
    objects: S3ObjectStore, older_than_secs: float, *, limit: int, now: float | None = None
) -> int:
    """Abort incomplete uploads started more than ``older_than_secs`` ago; how many.

    A younger upload may belong to a live writer on any instance, so the bound should
    exceed the longest upload (the default wiring uses a day). Looks at no more than
    ``limit`` uploads per call.
    """
    moment = time.time() if now is None else now
    uploads = await objects.incomplete_uploads(limit=limit)
    return await _abort_all(
        objects, [u for u in uploads if moment - u.initiated >= older_than_secs]
    )


async def _abort_all(objects: S3ObjectStore, uploads: Sequence[IncompleteUpload]) -> int:
    """Abort ``uploads``; how many were still there to abort (another instance's sweep, or
    the writer completing, may have ended one meanwhile)."""
    aborted = 0
    for upload in uploads:
        aborted += await objects.abort_upload(upload.key, upload.upload_id)
    return aborted
