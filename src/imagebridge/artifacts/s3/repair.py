"""Putting half-done writes right in the bucket, only where it is provably safe.

A marker whose image is gone is removed with its sidecar; a marker whose sidecar is gone
has the reference cleared. A changed image or sidecar is counted and never touched.
Objects no marker names and stale multipart uploads are counted, and removed when
applying (:mod:`.leftovers`).
"""

from __future__ import annotations

from collections.abc import Callable

from imagebridge.artifacts.records import RepairReport
from imagebridge.artifacts.s3.leftovers import sweep_unowned
from imagebridge.artifacts.s3.maintenance import remove_artifact
from imagebridge.artifacts.s3.markers import image_key, list_markers, put_marker, sidecar_key
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.reads import read_image, sidecar_bytes
from imagebridge.imaging.inspect import ImageLimits

__all__ = ["repair_orphans"]


async def repair_orphans(
    objects: S3ObjectStore,
    limits: ImageLimits,
    *,
    max_scan: int,
    apply: bool,
    now: float,
    stale_temp_secs: int,
    stale_upload_secs: int,
    clock: Callable[[], float],
) -> RepairReport:
    """Audit (``apply=False``) or repair over checked arguments
    (:func:`~imagebridge.artifacts.rules.check_repair`)."""
    report = RepairReport()
    sweep = await sweep_unowned(
        objects,
        now - stale_temp_secs,
        max_scan,
        apply=apply,
        clock=clock,
        stale_upload_secs=stale_upload_secs,
    )
    report.stale_temp_files = sweep.found
    report.stale_temp_files_removed = sweep.removed
    report.temp_scan_limit_reached = sweep.limit_reached
    listed, report.scan_limit_reached = await list_markers(objects, max_scan)
    report.scanned = len(listed)
    for _marker_id, marker in listed:
        if marker is None:
            report.skipped += 1
            continue
        image = await objects.head(image_key(marker.id, marker.name))
        sidecar_ok = marker.sidecar_name is None or (
            await sidecar_bytes(objects, marker) is not None
        )
        if image is not None and await read_image(objects, marker, limits) is not None:
            if sidecar_ok:
                report.healthy += 1
            elif await objects.head(sidecar_key(marker.id)) is None:
                report.missing_sidecars += 1
                if apply:
                    await put_marker(objects, marker.with_sidecar(None, None))
                    report.repaired += 1
            else:
                report.skipped += 1  # a changed sidecar: never touched
        elif image is None:
            report.orphaned_records += 1
            if not sidecar_ok and await objects.head(sidecar_key(marker.id)):
                report.skipped += 1  # a changed sidecar: never touched
            elif apply:
                await remove_artifact(objects, marker)
                report.repaired += 1
        else:
            report.skipped += 1  # a changed image: never touched
    return report
