"""Removing artifacts from the directory tree: one on request, or many by retention.

Only what a marker vouches for is ever removed (the file holds exactly the recorded
bytes; a recorded sidecar is unchanged): a file the bridge did not write, or one replaced
since, is left alone. Retention sweeps crash leftovers first (:mod:`.leftovers`), then
removes verified artifacts past their age or beyond the newest ``max_artifacts``
(:func:`imagebridge.artifacts.rules.retention_victims`).
"""

from __future__ import annotations

import os

from imagebridge.artifacts.filesystem import objects
from imagebridge.artifacts.filesystem.errors import write_error
from imagebridge.artifacts.filesystem.leftovers import sweep_stale_temps
from imagebridge.artifacts.filesystem.markers import load_marker, remove_marker, scan_markers
from imagebridge.artifacts.filesystem.objects import Unsafe
from imagebridge.artifacts.filesystem.reads import owned_marker, verified
from imagebridge.artifacts.markers import Marker
from imagebridge.artifacts.records import CleanupReport
from imagebridge.artifacts.rules import not_found, retention_victims
from imagebridge.imaging.inspect import ImageLimits

__all__ = ["cleanup", "delete_artifact"]


def delete_artifact(
    root_fd: int, own_fd: int, canonical: str, owner: str | None, limits: ImageLimits
) -> None:
    """Remove a verified artifact ``owner`` may see: its image, sidecar and marker.

    The image goes first: a crash part-way leaves a marker naming a missing image, which
    the repair removes with its sidecar, so a deleted artifact never comes back.
    """
    marker = owned_marker(own_fd, canonical, owner)
    if verified(root_fd, marker, limits) is None:
        raise not_found()
    try:
        with objects.open_parent(root_fd, marker.name) as (parent, basename):
            os.unlink(basename, dir_fd=parent)
            objects.fsync_dir(parent)
        if marker.sidecar_name is not None:
            with objects.open_parent(root_fd, marker.sidecar_name) as (parent, basename):
                os.unlink(basename, dir_fd=parent)
        remove_marker(own_fd, marker)
    except FileNotFoundError as exc:  # a concurrent delete or cleanup won
        raise not_found() from exc
    except (Unsafe, OSError) as exc:
        raise write_error("could not delete the artifact", exc) from exc


def cleanup(
    root_fd: int,
    own_fd: int,
    limits: ImageLimits,
    *,
    now: float,
    max_age_secs: int,
    max_artifacts: int | None,
    max_scan_entries: int,
    stale_temp_secs: int,
) -> CleanupReport:
    """Retention over checked arguments (:func:`~imagebridge.artifacts.rules.check_cleanup`)."""
    report = CleanupReport()
    sweep = sweep_stale_temps(root_fd, own_fd, now - stale_temp_secs, max_scan_entries, apply=True)
    report.stale_temp_files = sweep.stale
    report.stale_temp_files_removed = sweep.removed
    report.temp_scan_limit_reached = sweep.limit_reached
    names, report.scan_limit_reached = scan_markers(own_fd, max_scan_entries)
    report.scanned = len(names)
    valid: list[Marker] = []
    for filename in names:
        marker = load_marker(own_fd, filename)
        if marker is None or verified(root_fd, marker, limits) is None:
            report.skipped += 1
        else:
            valid.append(marker)
    for marker in retention_victims(valid, int(now) - max_age_secs, max_artifacts):
        if _remove_verified(root_fd, own_fd, marker, limits):
            report.deleted += 1
        else:
            report.skipped += 1
    return report


def _remove_verified(root_fd: int, own_fd: int, marker: Marker, limits: ImageLimits) -> bool:
    current = load_marker(own_fd, f"{marker.id}.json")
    if current != marker or verified(root_fd, marker, limits) is None:
        return False
    try:
        if marker.sidecar_name is not None:
            with objects.open_parent(root_fd, marker.sidecar_name) as (parent, basename):
                os.unlink(basename, dir_fd=parent)
        with objects.open_parent(root_fd, marker.name) as (parent, basename):
            os.unlink(basename, dir_fd=parent)
            objects.fsync_dir(parent)
        remove_marker(own_fd, marker)
    except (Unsafe, OSError):
        return False
    return True
