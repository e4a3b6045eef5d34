"""What an artifact backend offers async code, whichever medium holds the bytes.

The filesystem store (:class:`~imagebridge.artifacts.filesystem.store.AsyncArtifactStore`,
the directory tree in a worker thread) and the S3 store
(:class:`~imagebridge.artifacts.s3.store.S3ArtifactStore`, an S3-compatible bucket) both
satisfy :class:`ArtifactBackend`; ``tests/artifacts/test_backends.py`` runs one suite of
behaviour on both, and ``application/artifact_backend.py`` (which chooses one) checks both
against it. Callers that need only these operations ask for the protocol, so a deployment
can choose the backend. Operations outside it (a local path, a presigned URL) belong to
one backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from imagebridge.artifacts.publication import Publication
from imagebridge.artifacts.records import (
    ArtifactContent,
    CleanupReport,
    RepairReport,
    StoredArtifact,
)
from imagebridge.artifacts.rules import (
    DEFAULT_MAX_AGE_SECS,
    DEFAULT_MAX_SCAN_ENTRIES,
    DEFAULT_STALE_TEMP_SECS,
)

__all__ = ["ArtifactBackend"]


class ArtifactBackend(Protocol):
    """Publish, read, attach metadata, thumbnail, delete, clean up and repair (all awaitable)."""

    async def publish(self, publication: Publication) -> StoredArtifact:
        """Verify the image and store it; the artifact exists once its marker does."""
        ...

    async def attach_metadata(
        self, artifact_id: str, name: str, record: Mapping[str, Any] | bytes
    ) -> str:
        """Store the sidecar once and record it in the marker; returns its portable name."""
        ...

    async def read(self, artifact_id: str, owner: str | None) -> ArtifactContent:
        """Verified bytes of an artifact owned by ``owner`` (``None``: a trusted local caller)."""
        ...

    async def read_sidecar(self, artifact_id: str, owner: str | None) -> dict[str, Any] | None: ...

    async def thumbnail(self, artifact_id: str, owner: str | None, edge: int) -> bytes: ...

    async def delete(self, artifact_id: str, owner: str | None) -> None:
        """Remove an owned, verified artifact's image, sidecar and marker (``not found``
        like :meth:`read` for an unknown, foreign or altered one, which is left alone)."""

    async def cleanup(
        self,
        now: float | None = None,
        *,
        max_age_secs: int = DEFAULT_MAX_AGE_SECS,
        max_artifacts: int | None = None,
        max_scan_entries: int = DEFAULT_MAX_SCAN_ENTRIES,
        stale_temp_secs: int = DEFAULT_STALE_TEMP_SECS,
    ) -> CleanupReport: ...

    async def repair_orphans(
        self,
        max_scan: int,
        *,
        apply: bool,
        now: float | None = None,
        stale_temp_secs: int = DEFAULT_STALE_TEMP_SECS,
    ) -> RepairReport: ...
