"""The rules every artifact backend applies alike, written once so the backends answer alike.

The filesystem store and the S3 store keep their bytes differently but must refuse the same
calls with the same errors: the ``artifact`` error and its "not found or is invalid" (said of
an unknown, foreign and altered artifact alike), the metadata sidecar's encoding and bounds,
the thumbnail's edge, the retention and repair arguments and the crash-leftover grace. How
a publication is checked and named is :mod:`imagebridge.artifacts.publication`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from imagebridge.artifacts.markers import Marker
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.response import MAX_SIDECAR_BYTES
from imagebridge.imaging.ids import canonical_uuid
from imagebridge.imaging.inspect import ImageLimits
from imagebridge.imaging.thumbnails import MAX_THUMBNAIL_EDGE, MIN_THUMBNAIL_EDGE, make_thumbnail

__all__ = [
    "DEFAULT_MAX_AGE_SECS",
    "DEFAULT_MAX_SCAN_ENTRIES",
    "DEFAULT_STALE_TEMP_SECS",
    "MIN_STALE_TEMP_SECS",
    "NOT_FOUND",
    "THUMBNAIL_EDGE_MESSAGE",
    "as_artifact_error",
    "canonical_id",
    "check_cleanup",
    "check_grace",
    "check_repair",
    "check_thumbnail_edge",
    "decode_sidecar",
    "encode_sidecar",
    "is_json_object",
    "not_found",
    "require_id",
    "retention_victims",
    "sidecar_name",
    "thumbnail",
]

NOT_FOUND = "artifact was not found or is invalid"
THUMBNAIL_EDGE_MESSAGE = "thumbnail edge must be between 32 and 2048 pixels"
DEFAULT_MAX_AGE_SECS = 7 * 24 * 60 * 60
DEFAULT_MAX_SCAN_ENTRIES = 100_000
DEFAULT_STALE_TEMP_SECS = 60 * 60
MIN_STALE_TEMP_SECS = 60
"""A crash leftover younger than this may belong to a live writer: it is never removed."""


# -- errors -----------------------------------------------------------------------------------


def not_found() -> BridgeError:
    """Unknown, foreign, altered and invalid artifacts all get this one answer."""
    return BridgeError.artifact(NOT_FOUND)


def as_artifact_error(error: BridgeError) -> BridgeError:
    """An image that failed inspection, reported as the artifact failure it is here."""
    return BridgeError(ErrorCode.ARTIFACT, error.message, details=error.details or None)


def canonical_id(artifact_id: object) -> str | None:
    """The canonical spelling of an artifact id, ``None`` for anything else."""
    return canonical_uuid(artifact_id) if isinstance(artifact_id, str) else None


def require_id(artifact_id: object) -> str:
    """The canonical spelling of an artifact id; anything else is "not found"."""
    canonical = canonical_id(artifact_id)
    if canonical is None:
        raise not_found()
    return canonical


# -- sidecars ---------------------------------------------------------------------------------


def is_json_object(encoded: bytes) -> bool:
    try:
        return isinstance(json.loads(encoded.decode("utf-8")), dict)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False


def encode_sidecar(record: Mapping[str, Any] | bytes) -> bytes:
    """The sidecar's bytes: a JSON object of at most :data:`MAX_SIDECAR_BYTES`."""
    if isinstance(record, bytes | bytearray):
        encoded = bytes(record)
    else:
        try:
            text = json.dumps(dict(record), indent=2, ensure_ascii=False, allow_nan=False)
            encoded = (text + "\n").encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            raise BridgeError.artifact("artifact metadata must be a bounded JSON object") from exc
    if not encoded or len(encoded) > MAX_SIDECAR_BYTES or not is_json_object(encoded):
        raise BridgeError.artifact(
            "artifact metadata must be a bounded JSON object", maximum_bytes=MAX_SIDECAR_BYTES
        )
    return encoded


def decode_sidecar(encoded: bytes) -> dict[str, Any]:
    """A verified sidecar's JSON object (anything else is "not found")."""
    value = json.loads(encoded.decode("utf-8"))
    if not isinstance(value, dict):
        raise not_found()
    return value


def sidecar_name(name: str, artifact_id: str) -> str:
    """The portable name of an artifact's sidecar: ``metadata-<id>.json`` beside it."""
    parent = name.rpartition("/")[0]
    basename = f"metadata-{artifact_id}.json"
    return f"{parent}/{basename}" if parent else basename


# -- thumbnails -------------------------------------------------------------------------------


def check_thumbnail_edge(edge: object) -> None:
    """A thumbnail fits ``edge``×``edge`` with ``edge`` in 32..2048 (else ``invalid_request``)."""
    if (
        isinstance(edge, bool)
        or not isinstance(edge, int)
        or not MIN_THUMBNAIL_EDGE <= edge <= MAX_THUMBNAIL_EDGE
    ):
        raise BridgeError(
            ErrorCode.INVALID_REQUEST,
            THUMBNAIL_EDGE_MESSAGE,
            details={"field": "edge"},
        )


def thumbnail(data: bytes, edge: int, limits: ImageLimits) -> bytes:
    """A PNG thumbnail of verified artifact bytes (blocking); a failure is ``artifact``."""
    try:
        return make_thumbnail(data, edge, limits)
    except BridgeError as error:
        raise as_artifact_error(error) from error


# -- retention and repair ---------------------------------------------------------------------


def check_grace(stale_temp_secs: int) -> None:
    """Refuse a grace period short enough to remove a live writer's leftover."""
    if (
        isinstance(stale_temp_secs, bool)
        or not isinstance(stale_temp_secs, int)
        or stale_temp_secs < MIN_STALE_TEMP_SECS
    ):
        raise BridgeError(
            ErrorCode.ARTIFACT,
            "stale temp file grace must be at least 60 seconds",
            details={"minimum_seconds": MIN_STALE_TEMP_SECS},
        )


def check_cleanup(
    max_age_secs: int, max_artifacts: int | None, max_scan_entries: int, stale_temp_secs: int
) -> None:
    """The arguments of ``cleanup``, refused before anything is looked at."""
    if max_scan_entries <= 0:
        raise BridgeError.artifact("retention scan limit must be greater than zero")
    if max_artifacts is not None and max_artifacts <= 0:
        raise BridgeError.artifact("retention max_artifacts must be greater than zero")
    if max_age_secs < 0:
        raise BridgeError.artifact("retention max_age_secs must not be negative")
    check_grace(stale_temp_secs)


def check_repair(max_scan: int, stale_temp_secs: int) -> None:
    """The arguments of ``repair_orphans``, refused before anything is looked at."""
    if max_scan <= 0:
        raise BridgeError.artifact("artifact repair scan limit must be greater than zero")
    check_grace(stale_temp_secs)


def retention_victims(
    valid: Iterable[Marker], cutoff: int, max_artifacts: int | None
) -> list[Marker]:
    """The verified artifacts retention removes: created at or before ``cutoff``, or beyond
    the newest ``max_artifacts`` (newest first; ties broken by id)."""
    ordered = sorted(valid, key=lambda m: (m.created_at, m.id), reverse=True)
    return [
        marker
        for position, marker in enumerate(ordered)
        if marker.created_at <= cutoff or (max_artifacts is not None and position >= max_artifacts)
    ]
