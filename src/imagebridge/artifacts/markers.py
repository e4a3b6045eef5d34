"""Ownership markers: the small JSON record that makes an artifact ours, on every backend.

One marker per artifact (at most :data:`MAX_MARKER_BYTES`): a file in the root's
ownership directory on a filesystem (``filesystem/markers.py``), an ``ownership/<id>.json``
object in a bucket (``s3/markers.py``), in the same format. It names the image, its
SHA-256 and the auth scope that created it; only a strictly valid marker whose file name
matches its id is believed, and only images it names with the recorded hash are ever read
back or deleted. Markers written by the original (no ``owner``) belong to
:data:`LEGACY_OWNER`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from imagebridge.artifacts.naming import is_safe_relative
from imagebridge.imaging.ids import canonical_uuid

__all__ = [
    "LEGACY_OWNER",
    "MAX_MARKER_BYTES",
    "MAX_OWNER_BYTES",
    "Marker",
    "is_sha256",
    "parse_marker",
    "valid_owner",
]

MAX_MARKER_BYTES = 4 * 1024
MAX_OWNER_BYTES = 256
LEGACY_OWNER = "anonymous-local"
_MARKER_KEYS = frozenset(
    {"version", "id", "name", "created_at", "sha256", "owner", "sidecar_name", "sidecar_sha256"}
)
_REQUIRED_MARKER_KEYS = frozenset({"version", "id", "name", "created_at", "sha256"})


def is_sha256(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def valid_owner(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_OWNER_BYTES
        and all("!" <= c <= "~" for c in value)
    )


@dataclass(frozen=True, slots=True)
class Marker:
    id: str
    name: str
    created_at: int
    sha256: str
    owner: str | None
    sidecar_name: str | None
    sidecar_sha256: str | None

    def encode(self) -> bytes:
        body: dict[str, Any] = {
            "version": 1,
            "id": self.id,
            "name": self.name,
            "created_at": self.created_at,
            "sha256": self.sha256,
        }
        if self.owner is not None:
            body["owner"] = self.owner
        if self.sidecar_name is not None:
            body["sidecar_name"] = self.sidecar_name
            body["sidecar_sha256"] = self.sidecar_sha256
        return json.dumps(body, separators=(",", ":")).encode()

    @property
    def effective_owner(self) -> str:
        return self.owner if self.owner is not None else LEGACY_OWNER

    def visible_to(self, owner: str | None) -> bool:
        """Whether ``owner`` may see this artifact (``None``: a trusted local caller)."""
        return owner is None or self.effective_owner == owner

    def with_sidecar(self, name: str | None, sha256: str | None) -> Marker:
        return Marker(self.id, self.name, self.created_at, self.sha256, self.owner, name, sha256)


def parse_marker(encoded: bytes, filename: str) -> Marker | None:
    """A strictly valid marker whose file name matches its id, else ``None``."""
    try:
        body = json.loads(encoded.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(body, dict):
        return None
    keys = set(body)
    if not _REQUIRED_MARKER_KEYS <= keys <= _MARKER_KEYS:
        return None
    marker_id = body["id"]
    created_at = body["created_at"]
    sidecar_name = body.get("sidecar_name")
    sidecar_sha = body.get("sidecar_sha256")
    owner = body.get("owner")
    valid = (
        body["version"] == 1
        and not isinstance(body["version"], bool)
        and isinstance(marker_id, str)
        and canonical_uuid(marker_id) == marker_id
        and filename == f"{marker_id}.json"
        and isinstance(body["name"], str)
        and is_safe_relative(body["name"])
        and isinstance(created_at, int)
        and not isinstance(created_at, bool)
        and created_at >= 0
        and is_sha256(body["sha256"])
        and ("owner" not in body or valid_owner(owner))
        and (sidecar_name is None) == (sidecar_sha is None)
        and ("sidecar_name" in body) == ("sidecar_sha256" in body)
        and (
            sidecar_name is None
            or (
                isinstance(sidecar_name, str)
                and is_safe_relative(sidecar_name)
                and is_sha256(sidecar_sha)
            )
        )
    )
    if not valid:
        return None
    return Marker(
        id=marker_id,
        name=body["name"],
        created_at=created_at,
        sha256=body["sha256"],
        owner=owner,
        sidecar_name=sidecar_name,
        sidecar_sha256=sidecar_sha,
    )
