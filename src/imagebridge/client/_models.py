"""Small result types the SDK adds for binary answers (images are not JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ArtifactFile", "JobPartial"]


@dataclass(frozen=True, slots=True)
class ArtifactFile:
    """Verified image bytes from ``/v1/artifacts/{id}`` (or its thumbnail)."""

    id: str
    data: bytes = field(repr=False)
    media_type: str
    filename: str | None
    sha256: str | None
    """The bridge's ``ETag`` digest, checked against ``data`` when present."""


@dataclass(frozen=True, slots=True)
class JobPartial:
    """The latest partial preview of a running job."""

    data: bytes = field(repr=False)
    media_type: str
    output_index: int | None
    partial_index: int | None
