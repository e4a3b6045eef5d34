"""A metadata sidecar beside its artifact: ``metadata-<id>.json``, recorded in the marker.

Attached at most once, to a verified artifact whose marker names exactly the given name.
Temp file, then the marker naming the sidecar, then the sidecar's name: a crash leaves a
temp file or a marker naming a missing sidecar (whose reference the repair clears after
the grace), never a sidecar nobody owns. The encoding and its bounds are
:func:`imagebridge.artifacts.rules.encode_sidecar`, the same for both backends.
"""

from __future__ import annotations

import contextlib
import hashlib

from imagebridge.artifacts.filesystem import objects
from imagebridge.artifacts.filesystem.errors import write_error
from imagebridge.artifacts.filesystem.markers import load_marker, write_marker
from imagebridge.artifacts.filesystem.objects import Unsafe
from imagebridge.artifacts.filesystem.publish import ARTIFACT_MODE
from imagebridge.artifacts.filesystem.reads import verified
from imagebridge.artifacts.markers import Marker
from imagebridge.artifacts.rules import sidecar_name
from imagebridge.contract.errors import BridgeError
from imagebridge.engine.crash_points import crash_point
from imagebridge.imaging.inspect import ImageLimits

__all__ = ["attach_sidecar"]


def attach_sidecar(
    root_fd: int, own_fd: int, canonical: str, name: str, encoded: bytes, limits: ImageLimits
) -> str:
    """Write the encoded sidecar beside the artifact ``canonical`` named ``name`` and
    record it in its marker; returns the sidecar's portable name."""
    marker = load_marker(own_fd, f"{canonical}.json")
    if (
        marker is None
        or marker.name != name
        or marker.sidecar_name is not None
        or verified(root_fd, marker, limits) is None
    ):
        raise BridgeError.artifact("artifact metadata cannot be attached to this artifact")
    named = sidecar_name(name, canonical)
    try:
        with objects.open_parent(root_fd, name) as (parent, _basename):
            _publish_sidecar(parent, own_fd, marker, named.rpartition("/")[2], named, encoded)
    except (Unsafe, OSError) as exc:
        raise write_error("could not write metadata sidecar", exc) from exc
    return named


def _publish_sidecar(
    parent: int, own_fd: int, marker: Marker, basename: str, named: str, encoded: bytes
) -> None:
    temp = objects.write_temp(parent, encoded, ARTIFACT_MODE)
    linked = False
    updated = marker.with_sidecar(named, hashlib.sha256(encoded).hexdigest())
    try:
        crash_point("sidecar.temp_written")
        with objects.locked(own_fd, exclusive=False):
            write_marker(own_fd, updated, replace=True)
            crash_point("sidecar.marker_written")
            if not objects.link_noclobber(parent, temp, basename):
                raise BridgeError.artifact("could not publish metadata sidecar without overwrite")
            linked = True
        crash_point("sidecar.linked")
        objects.fsync_dir(parent)
    except BaseException:
        current = load_marker(own_fd, f"{marker.id}.json")
        if current == updated:  # put the old record back
            with contextlib.suppress(BridgeError):
                write_marker(own_fd, marker, replace=True)
        if linked:
            objects.remove_quietly(parent, basename)
            with contextlib.suppress(OSError):
                objects.fsync_dir(parent)
        raise
    finally:
        objects.remove_quietly(parent, temp)
