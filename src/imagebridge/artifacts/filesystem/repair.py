"""Putting half-done writes right in the directory tree, only where it is provably safe.

A marker whose image file is gone (a crash between marker and name, or part-way through a
delete) is removed with its unchanged sidecar; a marker naming a sidecar that is gone has
the reference cleared. Anything changed or invalid is counted and never touched. Each
decision is taken holding the ownership directory's lock alone: a live publication holds
it (shared) from its marker to its file's name, so a file missing here is a crash's.
"""

from __future__ import annotations

import os

from imagebridge.artifacts.filesystem import objects
from imagebridge.artifacts.filesystem.leftovers import sweep_stale_temps
from imagebridge.artifacts.filesystem.markers import (
    load_marker,
    remove_marker,
    scan_markers,
    write_marker,
)
from imagebridge.artifacts.filesystem.objects import PathState, Unsafe
from imagebridge.artifacts.filesystem.reads import read_artifact, sidecar_state, verified
from imagebridge.artifacts.markers import Marker
from imagebridge.artifacts.records import RepairReport
from imagebridge.contract.errors import BridgeError
from imagebridge.imaging.inspect import ImageLimits

__all__ = ["repair_orphans"]


def repair_orphans(
    root_fd: int,
    own_fd: int,
    limits: ImageLimits,
    *,
    max_scan: int,
    apply: bool,
    now: float,
    stale_temp_secs: int,
) -> RepairReport:
    """Audit (``apply=False``) or repair over checked arguments
    (:func:`~imagebridge.artifacts.rules.check_repair`)."""
    report = RepairReport()
    sweep = sweep_stale_temps(root_fd, own_fd, now - stale_temp_secs, max_scan, apply=apply)
    report.stale_temp_files = sweep.stale
    report.stale_temp_files_removed = sweep.removed
    report.temp_scan_limit_reached = sweep.limit_reached
    names, report.scan_limit_reached = scan_markers(own_fd, max_scan)
    report.scanned = len(names)
    for filename in names:
        marker = load_marker(own_fd, filename)
        if marker is None:
            report.skipped += 1
        elif verified(root_fd, marker, limits) is not None:
            report.healthy += 1
        else:
            with objects.locked(own_fd, exclusive=True):
                _repair_one(root_fd, own_fd, filename, report, apply, limits)
    return report


def _repair_one(
    root_fd: int,
    own_fd: int,
    filename: str,
    report: RepairReport,
    apply: bool,
    limits: ImageLimits,
) -> None:
    marker = load_marker(own_fd, filename)
    if marker is None:
        report.skipped += 1
        return
    sidecar = sidecar_state(root_fd, marker)
    if read_artifact(root_fd, marker, limits) is not None:
        if sidecar in (None, PathState.REGULAR):
            report.healthy += 1
        elif sidecar is PathState.MISSING:
            report.missing_sidecars += 1
            if apply:
                ok = _clear_sidecar(root_fd, own_fd, marker, limits)
                report.repaired += ok
                report.skipped += not ok
        else:
            report.skipped += 1
    elif objects.entry_state(root_fd, marker.name).state is PathState.MISSING:
        report.orphaned_records += 1
        if sidecar is PathState.INVALID:
            report.skipped += 1
        elif apply:
            ok = _remove_orphan(root_fd, own_fd, marker)
            report.repaired += ok
            report.skipped += not ok
    else:
        report.skipped += 1


def _clear_sidecar(root_fd: int, own_fd: int, marker: Marker, limits: ImageLimits) -> bool:
    current = load_marker(own_fd, f"{marker.id}.json")
    if (
        current != marker
        or read_artifact(root_fd, marker, limits) is None
        or sidecar_state(root_fd, marker) is not PathState.MISSING
    ):
        return False
    try:
        write_marker(own_fd, marker.with_sidecar(None, None), replace=True)
    except BridgeError:
        return False
    return True


def _remove_orphan(root_fd: int, own_fd: int, marker: Marker) -> bool:
    current = load_marker(own_fd, f"{marker.id}.json")
    if current != marker or objects.entry_state(root_fd, marker.name).state is not (
        PathState.MISSING
    ):
        return False
    sidecar = sidecar_state(root_fd, marker)
    try:
        if sidecar is PathState.INVALID:
            return False
        if sidecar is PathState.REGULAR and marker.sidecar_name is not None:
            with objects.open_parent(root_fd, marker.sidecar_name) as (parent, basename):
                os.unlink(basename, dir_fd=parent)
                objects.fsync_dir(parent)
        remove_marker(own_fd, marker)
    except (Unsafe, OSError):
        return False
    return True
