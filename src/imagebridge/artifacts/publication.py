"""What every artifact backend checks before it writes a byte: one plan, one set of rules.

The filesystem store and the S3 store publish differently (a linked file versus an object
and its record) but must refuse the same requests with the same errors and name artifacts
the same way, so the checks and the naming live here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from imagebridge.artifacts.markers import valid_owner
from imagebridge.artifacts.naming import (
    is_safe_filename,
    is_safe_relative,
    sanitize_prefix,
    with_extension,
)
from imagebridge.contract.enums import ArtifactCollisionPolicy, OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.ids import uuid7
from imagebridge.imaging.inspect import ImageInfo

__all__ = ["PublicationPlan", "as_artifact_error", "plan_publication"]


@dataclass(frozen=True, slots=True)
class PublicationPlan:
    """A checked publication: the new artifact's id, its requested base name and policy."""

    artifact_id: str
    basename: str
    policy: ArtifactCollisionPolicy


def _artifact_error(message: str, **details: Any) -> BridgeError:
    return BridgeError(ErrorCode.ARTIFACT, message, details=details or None)


def as_artifact_error(error: BridgeError) -> BridgeError:
    """An image that failed inspection, reported as the artifact failure it is here."""
    return BridgeError(ErrorCode.ARTIFACT, error.message, details=error.details or None)


def plan_publication(
    info: ImageInfo,
    *,
    expected_format: OutputFormat | str | None,
    owner: str,
    filename_prefix: str | None,
    directory: str | None,
    filename: str | None,
    collision: ArtifactCollisionPolicy | str,
) -> PublicationPlan:
    """Check the options against the verified image and name the artifact.

    The name is ``filename`` (extension appended if missing) when given, else
    ``<sanitised prefix>-<id>.<ext>``; ``directory`` is joined by the caller.
    """
    try:
        expected = None if expected_format is None else OutputFormat(expected_format)
        policy = ArtifactCollisionPolicy(collision)
    except ValueError as exc:
        raise _artifact_error("artifact publication options are invalid") from exc
    if expected is not None and info.format is not expected:
        raise _artifact_error(
            "generated image format does not match the effective request",
            expected_format=expected.value,
            actual_format=info.format.value,
        )
    if not valid_owner(owner):
        raise _artifact_error("artifact owner scope is invalid")
    if directory is not None and not is_safe_relative(directory):
        raise _artifact_error("output directory is not a safe relative path")
    if filename is not None and not is_safe_filename(filename, info.format):
        raise _artifact_error(
            "output filename must be a safe component with a matching image extension"
        )
    artifact_id = str(uuid7())
    basename = (
        with_extension(filename, info.format)
        if filename is not None
        else f"{sanitize_prefix(filename_prefix or 'image')}-{artifact_id}.{info.format.extension}"
    )
    return PublicationPlan(artifact_id=artifact_id, basename=basename, policy=policy)
