"""What an artifact store offers async code, whichever backend holds the bytes.

:class:`~.async_store.AsyncArtifactStore` (the filesystem store, in a worker thread) and
:class:`~.s3_store.S3ArtifactStore` (an S3-compatible bucket) both satisfy
:class:`ArtifactBackend`; ``tests/artifacts/test_backends.py`` runs one suite of behaviour
on both. Callers that need only these operations should ask for the protocol, so a
deployment can choose the backend. Operations outside it (a local path, a presigned URL)
belong to one backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from imagebridge.artifacts.store import ArtifactContent, CleanupReport, RepairReport
from imagebridge.artifacts.temp_sweep import DEFAULT_STALE_TEMP_SECS
from imagebridge.contract.enums import ArtifactCollisionPolicy, OutputFormat
from imagebridge.imaging.inspect import ImageInfo

__all__ = ["ArtifactBackend", "Published"]


class Published(Protocol):
    """A newly stored artifact: its id, portable name and verified image facts."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def info(self) -> ImageInfo: ...


class ArtifactBackend(Protocol):
    """Publish, read, attach metadata, thumbnail, delete, clean up and repair (all awaitable)."""

    async def publish(
        self,
        data: bytes,
        *,
        expected_format: OutputFormat | str | None,
        owner: str,
        filename_prefix: str | None = None,
        directory: str | None = None,
        filename: str | None = None,
        collision: ArtifactCollisionPolicy | str = ArtifactCollisionPolicy.ERROR,
    ) -> Published: ...

    async def attach_metadata(
        self, artifact_id: str, name: str, record: Mapping[str, Any] | bytes
    ) -> str: ...

    async def read(self, artifact_id: str, owner: str | None) -> ArtifactContent: ...

    async def read_sidecar(self, artifact_id: str, owner: str | None) -> dict[str, Any] | None: ...

    async def thumbnail(self, artifact_id: str, owner: str | None, edge: int) -> bytes: ...

    async def delete(self, artifact_id: str, owner: str | None) -> None:
        """Remove an owned, verified artifact's image, sidecar and marker (``not found``
        like :meth:`read` for an unknown, foreign or altered one, which is left alone)."""

    async def cleanup(
        self,
        now: float | None = None,
        *,
        max_age_secs: int = 7 * 24 * 60 * 60,
        max_artifacts: int | None = None,
        max_scan_entries: int = 100_000,
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


def _conforms() -> None:  # pragma: no cover - checked by mypy, never run
    from imagebridge.artifacts.async_store import AsyncArtifactStore
    from imagebridge.artifacts.s3_store import S3ArtifactStore

    def accepts(backend: ArtifactBackend) -> None: ...

    accepts(AsyncArtifactStore.__new__(AsyncArtifactStore))
    accepts(S3ArtifactStore.__new__(S3ArtifactStore))
