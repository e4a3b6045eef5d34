"""Reading an artifact back from the directory tree: only what its marker vouches for.

An image is served only when its file, reached without following a symlink, holds exactly
the bytes whose SHA-256 the marker recorded and still decodes within the limits; a
recorded sidecar must be present, unchanged and a JSON object. Anything else (unknown,
foreign, altered) is the one "not found or is invalid" answer of
:mod:`imagebridge.artifacts.rules`.
"""

from __future__ import annotations

import hashlib

from imagebridge.artifacts.filesystem import objects
from imagebridge.artifacts.filesystem.markers import load_marker
from imagebridge.artifacts.filesystem.objects import PathState, Unsafe
from imagebridge.artifacts.markers import Marker
from imagebridge.artifacts.records import ArtifactContent
from imagebridge.artifacts.rules import is_json_object, not_found
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.response import MAX_SIDECAR_BYTES
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, inspect_image

__all__ = [
    "owned_marker",
    "read_artifact",
    "read_content",
    "read_sidecar_bytes",
    "sidecar_state",
    "verified",
]


def read_artifact(
    root_fd: int, marker: Marker, limits: ImageLimits
) -> tuple[bytes, ImageInfo] | None:
    """The artifact's bytes if they are exactly what was published, else ``None``."""
    try:
        with objects.open_parent(root_fd, marker.name) as (parent, basename):
            data = objects.read_regular(parent, basename, limits.max_encoded_bytes)
    except (Unsafe, OSError):
        return None
    if hashlib.sha256(data).hexdigest() != marker.sha256:
        return None
    try:
        info = inspect_image(data, limits)
    except BridgeError:
        return None
    return data, info


def sidecar_state(root_fd: int, marker: Marker) -> PathState | None:
    """``None`` when no sidecar is recorded; ``REGULAR`` means present and unchanged."""
    if marker.sidecar_name is None:
        return None
    state = objects.entry_state(root_fd, marker.sidecar_name)
    if state.state is not PathState.REGULAR:
        return state.state
    try:
        with objects.open_parent(root_fd, marker.sidecar_name) as (parent, basename):
            encoded = objects.read_regular(parent, basename, MAX_SIDECAR_BYTES)
    except (Unsafe, OSError):
        return PathState.INVALID
    if hashlib.sha256(encoded).hexdigest() != marker.sidecar_sha256 or not is_json_object(encoded):
        return PathState.INVALID
    return PathState.REGULAR


def verified(root_fd: int, marker: Marker, limits: ImageLimits) -> tuple[bytes, ImageInfo] | None:
    """The image as published, with its recorded sidecar (if any) unchanged, else ``None``."""
    loaded = read_artifact(root_fd, marker, limits)
    if loaded is None:
        return None
    if sidecar_state(root_fd, marker) not in (None, PathState.REGULAR):
        return None
    return loaded


def owned_marker(own_fd: int, canonical: str, owner: str | None) -> Marker:
    """The marker of the artifact ``canonical`` (a checked id) if ``owner`` may see it,
    else "not found"."""
    marker = load_marker(own_fd, f"{canonical}.json")
    if marker is None or not marker.visible_to(owner):
        raise not_found()
    return marker


def read_content(
    root_fd: int, own_fd: int, canonical: str, owner: str | None, limits: ImageLimits
) -> ArtifactContent:
    """Verified bytes of an artifact ``owner`` may see, else "not found"."""
    marker = owned_marker(own_fd, canonical, owner)
    loaded = verified(root_fd, marker, limits)
    if loaded is None:
        raise not_found()
    data, info = loaded
    return ArtifactContent(marker.id, marker.name, data, info, marker.sidecar_name)


def read_sidecar_bytes(root_fd: int, sidecar_name: str) -> bytes:
    """The sidecar file's bytes (at most 1 MiB), else "not found"."""
    try:
        with objects.open_parent(root_fd, sidecar_name) as (parent, basename):
            return objects.read_regular(parent, basename, MAX_SIDECAR_BYTES)
    except (Unsafe, OSError) as exc:
        raise not_found() from exc
