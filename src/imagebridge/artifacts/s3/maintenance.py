"""Removing artifacts from the bucket: one on request, or many by retention.

Only what a marker vouches for is removed. A delete takes the marker first, so the
artifact is gone for every instance at once (a crash after it leaves objects no marker
names, which :mod:`.leftovers` removes); retention takes the sidecar, the image, then the
marker (a crash part-way leaves a marker the repair fixes), after sweeping crash
leftovers, for verified artifacts past their age or beyond the newest ``max_artifacts``
(:func:`imagebridge.artifacts.rules.retention_victims`).
"""

from __future__ import annotations

from collections.abc import Callable

from imagebridge.artifacts.markers import Marker
from imagebridge.artifacts.records import CleanupReport
from imagebridge.artifacts.rules import retention_victims
from imagebridge.artifacts.s3.errors import write_fault
from imagebridge.artifacts.s3.leftovers import sweep_unowned
from imagebridge.artifacts.s3.markers import image_key, list_markers, marker_key, sidecar_key
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.reads import read_content, read_image
from imagebridge.contract.errors import BridgeError
from imagebridge.engine.crash_points import crash_point
from imagebridge.imaging.inspect import ImageLimits

__all__ = ["cleanup", "delete_artifact", "remove_artifact"]


async def delete_artifact(
    objects: S3ObjectStore, artifact_id: str, owner: str | None, limits: ImageLimits
) -> None:
    """Remove an owned, verified artifact's objects (``not found`` like a read for an
    unknown, foreign or altered one, which is left alone)."""
    content = await read_content(objects, artifact_id, owner, limits)
    try:
        await objects.delete(marker_key(content.id))
        crash_point("s3.marker_deleted")
        await objects.delete(image_key(content.id, content.name))
        if content.sidecar_name is not None:
            await objects.delete(sidecar_key(content.id))
    except BridgeError as error:
        raise write_fault(error) from error


async def remove_artifact(objects: S3ObjectStore, marker: Marker) -> None:
    """Sidecar, image, then marker: a crash part-way leaves a marker the repair fixes."""
    if marker.sidecar_name is not None:
        await objects.delete(sidecar_key(marker.id))
    await objects.delete(image_key(marker.id, marker.name))
    await objects.delete(marker_key(marker.id))


async def cleanup(
    objects: S3ObjectStore,
    limits: ImageLimits,
    *,
    now: float,
    max_age_secs: int,
    max_artifacts: int | None,
    max_scan_entries: int,
    stale_temp_secs: int,
    stale_upload_secs: int,
    clock: Callable[[], float],
) -> CleanupReport:
    """Retention over checked arguments (:func:`~imagebridge.artifacts.rules.check_cleanup`);
    ``clock`` (the store's) ages multipart uploads."""
    report = CleanupReport()
    sweep = await sweep_unowned(
        objects,
        now - stale_temp_secs,
        max_scan_entries,
        apply=True,
        clock=clock,
        stale_upload_secs=stale_upload_secs,
    )
    report.stale_temp_files = sweep.found
    report.stale_temp_files_removed = sweep.removed
    report.temp_scan_limit_reached = sweep.limit_reached
    listed, report.scan_limit_reached = await list_markers(objects, max_scan_entries)
    report.scanned = len(listed)
    valid: list[Marker] = []
    for _marker_id, marker in listed:
        if marker is None or await read_image(objects, marker, limits) is None:
            report.skipped += 1
        else:
            valid.append(marker)
    for marker in retention_victims(valid, int(now) - max_age_secs, max_artifacts):
        await remove_artifact(objects, marker)
        report.deleted += 1
    return report
