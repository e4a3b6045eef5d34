"""``artifacts.url_mode = "presigned"``: a ``url`` output is a presigned URL of the object.

The S3 twin's ``links.py`` (the filesystem twin's is the bridge's own signed links).

The engine's ``ArtifactLinker`` port, on the S3 backend: the client fetches the image
from the object store itself (the bridge serves none of those bytes), until the link
expires after ``artifacts.url_ttl_secs``. Presigning is local (no request to the store).
The bridge's own signed links (``/v1/artifact-links/…``) keep working for links already
handed out.
"""

from __future__ import annotations

from imagebridge.artifacts.s3.store import S3ArtifactStore
from imagebridge.engine.publishing import PublishedArtifact

__all__ = ["PresignedArtifactLinks"]


class PresignedArtifactLinks:
    """Mints presigned GET URLs of published artifacts' images."""

    def __init__(self, store: S3ArtifactStore, ttl_secs: int) -> None:
        self._store = store
        self._ttl = ttl_secs

    @property
    def ttl_secs(self) -> int:
        return self._ttl

    async def ready(self) -> None:
        """Nothing to load: the object store's credentials sign the URL."""

    async def link(self, artifact: PublishedArtifact) -> str:
        return await self._store.presigned_link(artifact.id, artifact.name, self._ttl)
