"""Where the filesystem store keeps its ownership markers: one file each, in one directory.

``<root>/.imagegen-bridge-ownership/<id>.json`` (mode 0600, at most 4 KiB) holds the
marker of :mod:`imagebridge.artifacts.markers`. A new marker is linked without ever
overwriting one; a changed one (a sidecar recorded or cleared) replaces the old
atomically; every change is made durable with an ``fsync`` of the directory before the
file it names exists, so a crash never leaves a file nobody owns.
"""

from __future__ import annotations

import contextlib
import os

from imagebridge.artifacts.filesystem import objects
from imagebridge.artifacts.filesystem.errors import write_error
from imagebridge.artifacts.filesystem.objects import Unsafe
from imagebridge.artifacts.markers import MAX_MARKER_BYTES, Marker, parse_marker
from imagebridge.contract.errors import BridgeError

__all__ = [
    "OWNERSHIP_DIRECTORY",
    "load_marker",
    "remove_marker",
    "scan_markers",
    "withdraw_marker",
    "write_marker",
]

OWNERSHIP_DIRECTORY = ".imagegen-bridge-ownership"
_MARKER_MODE = 0o600


def load_marker(own_fd: int, filename: str) -> Marker | None:
    """The strictly valid marker in ``filename``, else ``None`` (never an error)."""
    try:
        encoded = objects.read_regular(own_fd, filename, MAX_MARKER_BYTES)
    except (Unsafe, OSError):
        return None
    return parse_marker(encoded, filename)


def write_marker(own_fd: int, marker: Marker, *, replace: bool = False) -> None:
    """Store ``marker`` durably: a new one never overwrites, ``replace`` swaps atomically."""
    encoded = marker.encode()
    if len(encoded) > MAX_MARKER_BYTES:
        raise BridgeError.artifact("artifact ownership record is too large")
    try:
        temp = objects.write_temp(own_fd, encoded, _MARKER_MODE)
    except OSError as exc:
        raise write_error("could not write artifact ownership record", exc) from exc
    target = f"{marker.id}.json"
    try:
        if replace:
            objects.replace_atomically(own_fd, temp, target)
        elif not objects.link_noclobber(own_fd, temp, target):
            raise BridgeError.artifact("artifact ownership record already exists")
    except OSError as exc:
        raise write_error("could not publish artifact ownership record", exc) from exc
    finally:
        objects.remove_quietly(own_fd, temp)
    try:
        objects.fsync_dir(own_fd)
    except OSError as exc:
        if not replace:  # a new marker that may not survive a crash is withdrawn
            objects.remove_quietly(own_fd, target)
        raise write_error("could not sync artifact ownership records", exc) from exc


def withdraw_marker(own_fd: int, artifact_id: str) -> None:
    """Remove the marker of a publication that did not complete (best effort)."""
    objects.remove_quietly(own_fd, f"{artifact_id}.json")
    with contextlib.suppress(OSError):
        objects.fsync_dir(own_fd)


def remove_marker(own_fd: int, marker: Marker) -> None:
    """Remove ``marker`` durably (the artifact is gone once this returns)."""
    os.unlink(f"{marker.id}.json", dir_fd=own_fd)
    objects.fsync_dir(own_fd)


def scan_markers(own_fd: int, limit: int) -> tuple[list[str], bool]:
    """Up to ``limit`` ownership entry names, and whether more exist."""
    names: list[str] = []
    reached = False
    with os.scandir(own_fd) as entries:
        for entry in entries:
            if len(names) >= limit:
                reached = True
                break
            names.append(entry.name)
    return names, reached
