"""What is published, and what every backend checks before it writes a byte.

A :class:`~imagebridge.engine.publishing.Publication` (the engine's port value) is one image
and how to store it (owner scope, expected format, name, directory, collision policy): the
one value ``publish`` takes on every backend.
:func:`plan_publication` verifies the image and checks the options the same way for the
filesystem and the S3 store (same refusals, same errors), and names the artifact.
"""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.artifacts.markers import Marker, valid_owner
from imagebridge.artifacts.naming import (
    is_safe_filename,
    is_safe_relative,
    sanitize_prefix,
    with_extension,
)
from imagebridge.artifacts.rules import as_artifact_error
from imagebridge.contract.enums import ArtifactCollisionPolicy, OutputFormat
from imagebridge.contract.errors import BridgeError
from imagebridge.engine.publishing import Publication
from imagebridge.imaging.ids import uuid7
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, inspect_image

__all__ = ["Publication", "PublicationPlan", "plan_publication"]


@dataclass(frozen=True, slots=True)
class PublicationPlan:
    """A checked publication: the new artifact's id, verified image, requested base name,
    directory and collision policy."""

    artifact_id: str
    info: ImageInfo
    basename: str
    directory: str | None
    policy: ArtifactCollisionPolicy

    def name(self, basename: str | None = None) -> str:
        """The portable name of ``basename`` (default: the requested one) in the directory."""
        chosen = self.basename if basename is None else basename
        return f"{self.directory}/{chosen}" if self.directory else chosen

    def marker(self, name: str, owner: str, created_at: int) -> Marker:
        """The ownership record of this artifact under ``name`` (no sidecar yet)."""
        return Marker(
            id=self.artifact_id,
            name=name,
            created_at=created_at,
            sha256=self.info.sha256,
            owner=owner,
            sidecar_name=None,
            sidecar_sha256=None,
        )


def plan_publication(publication: Publication, limits: ImageLimits) -> PublicationPlan:
    """Verify the image and check the options against it, then name the artifact
    (blocking: the image is decoded).

    The name is ``filename`` (extension appended if missing) when given, else
    ``<sanitised prefix>-<id>.<ext>``.
    """
    try:
        info = inspect_image(publication.data, limits)
    except BridgeError as error:
        raise as_artifact_error(error) from error
    declared = publication.expected_format
    try:
        expected = None if declared is None else OutputFormat(declared)
        policy = ArtifactCollisionPolicy(publication.collision)
    except ValueError as exc:
        raise BridgeError.artifact("artifact publication options are invalid") from exc
    if expected is not None and info.format is not expected:
        raise BridgeError.artifact(
            "generated image format does not match the effective request",
            expected_format=expected.value,
            actual_format=info.format.value,
        )
    if not valid_owner(publication.owner):
        raise BridgeError.artifact("artifact owner scope is invalid")
    directory, filename = publication.directory, publication.filename
    if directory is not None and not is_safe_relative(directory):
        raise BridgeError.artifact("output directory is not a safe relative path")
    if filename is not None and not is_safe_filename(filename, info.format):
        raise BridgeError.artifact(
            "output filename must be a safe component with a matching image extension"
        )
    artifact_id = str(uuid7())
    prefix = sanitize_prefix(publication.filename_prefix or "image")
    basename = (
        with_extension(filename, info.format)
        if filename is not None
        else f"{prefix}-{artifact_id}.{info.format.extension}"
    )
    return PublicationPlan(artifact_id, info, basename, directory, policy)
