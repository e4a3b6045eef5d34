"""Crash leftovers: temp files a killed writer left in the artifact root.

Every artifact file is first written to a hidden ``.imagegen-bridge-tmp-<hex>`` file and then
linked to its name, so a process killed in between leaves that temp file behind. Cleanup and
repair remove such files once they are older than a grace period (a live writer's file is never
that old), looking only in the root, the ownership directory and the directories a publication
could have created, and examining a bounded number of directory entries. The grace and its
floor are :mod:`imagebridge.artifacts.rules`'s, the same for the S3 twin's ``leftovers.py``
(objects no marker names, stale multipart uploads).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections import deque
from dataclasses import dataclass

from imagebridge.artifacts.filesystem import objects
from imagebridge.artifacts.filesystem.objects import Unsafe
from imagebridge.artifacts.naming import is_safe_relative

__all__ = ["TempSweep", "sweep_stale_temps"]


@dataclass(slots=True)
class TempSweep:
    examined: int = 0
    stale: int = 0
    removed: int = 0
    limit_reached: bool = False


def sweep_stale_temps(
    root_fd: int, own_fd: int, cutoff: float, limit: int, *, apply: bool
) -> TempSweep:
    """Find (and with ``apply`` remove) temp files last changed before ``cutoff``.

    Publication directories are walked breadth first from the root (only names a
    publication could have created: safe relative paths, so never a hidden or
    symlinked directory), then the ownership directory; at most ``limit`` directory
    entries are examined in all.
    """
    sweep = TempSweep()
    pending: deque[str] = deque([""])
    while pending and not sweep.limit_reached:
        relative = pending.popleft()
        try:
            dir_fd = objects.open_relative_dir(root_fd, relative)
        except (Unsafe, OSError):
            continue  # replaced by a symlink or removed meanwhile: not ours to walk
        try:
            _sweep_directory(dir_fd, relative, cutoff, limit, sweep, pending, apply)
        finally:
            os.close(dir_fd)
    if not sweep.limit_reached:
        _sweep_directory(own_fd, None, cutoff, limit, sweep, None, apply)
    return sweep


def _sweep_directory(
    dir_fd: int,
    relative: str | None,
    cutoff: float,
    limit: int,
    sweep: TempSweep,
    pending: deque[str] | None,
    apply: bool,
) -> None:
    temps: list[str] = []
    try:
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                if sweep.examined >= limit:
                    sweep.limit_reached = True
                    break
                sweep.examined += 1
                if objects.is_temp_name(entry.name):
                    temps.append(entry.name)
                elif pending is not None and entry.is_dir(follow_symlinks=False):
                    child = f"{relative}/{entry.name}" if relative else entry.name
                    if is_safe_relative(child):
                        pending.append(child)
    except OSError:
        pass  # an unreadable directory is skipped; what was listed is still handled
    removed = False
    for name in temps:
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue  # gone already: its writer finished
        # A writer's every write moves mtime and it links right after its fsync, so an
        # old mtime means no live writer; a future mtime (clock skew) is never stale.
        if not stat.S_ISREG(info.st_mode) or info.st_mtime >= cutoff:
            continue
        sweep.stale += 1
        if not apply:
            continue
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            continue
        sweep.removed += 1
        removed = True
    if removed:
        with contextlib.suppress(OSError):
            objects.fsync_dir(dir_fd)
