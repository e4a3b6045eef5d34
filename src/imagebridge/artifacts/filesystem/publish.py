"""Publishing an image as a file: temp file, marker, then a name that is never overwritten.

The image is written to a hidden temp file and fsynced, the marker naming the candidate
name is made durable, and only then is the temp file linked to that name (``link``
refuses to overwrite). A crash at any step leaves a temp file (removed after the grace by
:mod:`.leftovers`) or a marker without its file (removed by :mod:`.repair`), never a file
nobody owns. With ``collision="suffix"`` a taken name becomes ``name-2.ext`` … up to
:data:`MAX_COLLISION_ATTEMPTS`.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace

from imagebridge.artifacts.filesystem import objects
from imagebridge.artifacts.filesystem.errors import write_error
from imagebridge.artifacts.filesystem.markers import withdraw_marker, write_marker
from imagebridge.artifacts.filesystem.objects import Unsafe
from imagebridge.artifacts.markers import Marker
from imagebridge.artifacts.naming import suffixed_filename
from imagebridge.artifacts.publication import Publication, PublicationPlan
from imagebridge.contract.enums import ArtifactCollisionPolicy
from imagebridge.contract.errors import BridgeError
from imagebridge.engine.crash_points import crash_point

__all__ = [
    "ARTIFACT_MODE",
    "MAX_COLLISION_ATTEMPTS",
    "link_new_file",
    "publication_dir",
    "publish_file",
]

MAX_COLLISION_ATTEMPTS = 10_000
ARTIFACT_MODE = 0o666  # narrowed by the process umask, like any file a tool writes


def publish_file(
    root_fd: int, own_fd: int, publication: Publication, plan: PublicationPlan, created_at: int
) -> str:
    """Publish the planned image below ``root_fd``; its portable name."""
    directory = plan.directory
    attempts = (
        MAX_COLLISION_ATTEMPTS
        if publication.filename is not None and plan.policy is ArtifactCollisionPolicy.SUFFIX
        else 1
    )
    marker = plan.marker("", publication.owner, created_at)
    dir_fd = publication_dir(root_fd, directory)
    try:
        basename = link_new_file(
            dir_fd, own_fd, publication.data, plan.basename, attempts, marker, directory
        )
        try:
            objects.fsync_dir(dir_fd)
        except OSError as exc:
            _unpublish(dir_fd, basename)
            withdraw_marker(own_fd, plan.artifact_id)
            raise write_error("could not sync the artifact directory", exc) from exc
    finally:
        os.close(dir_fd)
    return plan.name(basename)


def _unpublish(dir_fd: int, basename: str) -> None:
    """Remove a just-linked artifact whose publication could not be completed."""
    objects.remove_quietly(dir_fd, basename)
    with contextlib.suppress(OSError):
        objects.fsync_dir(dir_fd)


def publication_dir(root_fd: int, directory: str | None) -> int:
    """Open (creating) the publication's directory below the root, never through a symlink."""
    if directory is None:
        return os.dup(root_fd)
    fd = os.dup(root_fd)
    try:
        for component in directory.split("/"):
            child = objects.open_child_dir(fd, component, create=True)
            os.close(fd)
            fd = child
    except Unsafe as exc:
        os.close(fd)
        raise BridgeError.artifact(
            "output directory component must not be a file or symlink"
        ) from exc
    except OSError as exc:
        os.close(fd)
        raise write_error("could not create output directory component", exc) from exc
    return fd


def link_new_file(
    dir_fd: int,
    own_fd: int,
    data: bytes,
    requested: str,
    attempts: int,
    marker: Marker,
    directory: str | None,
) -> str:
    """Write ``data`` to a temp file, record the marker naming the candidate, then link
    the candidate name: the marker is durable before the name exists. Publishers share the
    ownership directory's lock from marker to name; repair takes it alone."""
    try:
        temp = objects.write_temp(dir_fd, data, ARTIFACT_MODE)
    except OSError as exc:
        raise write_error("could not write artifact", exc) from exc
    crash_point("artifact.temp_written")
    try:
        with objects.locked(own_fd, exclusive=False):
            linked = _name_new_file(dir_fd, own_fd, temp, requested, attempts, marker, directory)
    finally:
        objects.remove_quietly(dir_fd, temp)
    if linked is not None:
        return linked
    if attempts == 1:
        raise BridgeError.artifact("artifact file already exists", name=requested)
    raise BridgeError.artifact("artifact collision suffix limit was reached", name=requested)


def _name_new_file(
    dir_fd: int,
    own_fd: int,
    temp: str,
    requested: str,
    attempts: int,
    marker: Marker,
    directory: str | None,
) -> str | None:
    """Record a marker for each candidate name and link it; the name taken, or ``None``
    when every candidate exists (the marker is withdrawn then, and on any failure)."""
    recorded = False
    linked: str | None = None
    try:
        for attempt in range(1, attempts + 1):
            candidate = requested if attempt == 1 else suffixed_filename(requested, attempt)
            if objects.taken(dir_fd, candidate):
                continue  # no marker for a name already taken (a link may still race)
            name = f"{directory}/{candidate}" if directory else candidate
            write_marker(own_fd, replace(marker, name=name), replace=recorded)
            recorded = True
            crash_point("artifact.marker_written")
            try:
                if objects.link_noclobber(dir_fd, temp, candidate):
                    linked = candidate
                    crash_point("artifact.linked")
                    return candidate
            except OSError as exc:
                raise write_error("could not publish artifact without overwrite", exc) from exc
        return None
    finally:
        if linked is None and recorded:
            withdraw_marker(own_fd, marker.id)
