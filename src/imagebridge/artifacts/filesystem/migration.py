"""Moving artifacts into the directory tree from another store, and listing what is here.

``imagegen-bridge artifacts migrate`` and ``artifacts verify``
(:mod:`imagebridge.application.artifact_migration`) walk :func:`list_markers` and store
another backend's artifacts with :func:`check_import` and :func:`move_in`: published like
any artifact (temp file, marker, no-clobber name) under its own id, name, owner and
creation time, never over an existing file, and resumable (an artifact already here with
the same SHA-256 and verified bytes is left alone).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace

from imagebridge.artifacts.filesystem import objects
from imagebridge.artifacts.filesystem.errors import write_error
from imagebridge.artifacts.filesystem.markers import load_marker
from imagebridge.artifacts.filesystem.publish import link_new_file, publication_dir
from imagebridge.artifacts.filesystem.reads import verified
from imagebridge.artifacts.markers import Marker, valid_owner
from imagebridge.artifacts.naming import is_safe_filename, is_safe_relative
from imagebridge.contract.errors import BridgeError
from imagebridge.imaging.inspect import ImageLimits, inspect_image

__all__ = ["check_import", "list_markers", "move_in"]


def list_markers(own_fd: int, max_scan: int) -> tuple[list[Marker | None], bool]:
    """Up to ``max_scan`` parsed markers sorted by file name (``None`` for an invalid one),
    and whether more exist."""
    names = sorted(name for name in os.listdir(own_fd) if name.endswith(".json"))
    return [load_marker(own_fd, name) for name in names[:max_scan]], len(names) > max_scan


def check_import(marker: Marker, data: bytes, limits: ImageLimits) -> None:
    """Refuse bytes that are not the marker's, or an identity no publication could have."""
    if hashlib.sha256(data).hexdigest() != marker.sha256:
        raise BridgeError.artifact("artifact bytes do not match their recorded SHA-256")
    if not valid_owner(marker.effective_owner) or not is_safe_relative(marker.name):
        raise BridgeError.artifact("artifact identity is invalid")
    info = inspect_image(data, limits)
    if not is_safe_filename(marker.name.rpartition("/")[2], info.format):
        raise BridgeError.artifact("artifact identity is invalid")


def move_in(
    root_fd: int, own_fd: int, marker: Marker, data: bytes, limits: ImageLimits
) -> tuple[bool, Marker | None]:
    """Publish a checked artifact under its marker's identity unless it is already here;
    (whether it was, the marker now stored). Another artifact with this id is refused."""
    existing = load_marker(own_fd, f"{marker.id}.json")
    present = existing is not None
    if existing is not None and (
        existing.sha256 != marker.sha256 or verified(root_fd, existing, limits) is None
    ):
        raise BridgeError.artifact("another artifact with this id is already stored")
    if existing is None:
        directory, _, basename = marker.name.rpartition("/")
        dir_fd = publication_dir(root_fd, directory or None)
        try:
            fresh = replace(marker, name="", sidecar_name=None, sidecar_sha256=None)
            link_new_file(dir_fd, own_fd, data, basename, 1, fresh, directory or None)
            try:
                objects.fsync_dir(dir_fd)
            except OSError as exc:
                raise write_error("could not sync the artifact directory", exc) from exc
        finally:
            os.close(dir_fd)
        existing = load_marker(own_fd, f"{marker.id}.json")
    return present, existing
