"""The S3 artifact store: the filesystem store's rules, on objects in an S3-compatible bucket.

Chosen by ``artifacts.backend = "s3"`` (``application/artifact_backend.py``). It is an
:class:`~imagebridge.artifacts.interfaces.ArtifactBackend` with the same guarantees as the
filesystem store, under the key prefix of its
:class:`~imagebridge.artifacts.s3.objects.S3ObjectStore` (layout: :mod:`.markers`):

- **Visible only once complete.** The image goes up first (one PUT, or a completed
  multipart upload); the artifact exists only once its marker is stored after it. A
  marker that cannot be stored removes the image again.
- **Only what a marker vouches for is served.** A read checks the owner scope, the
  image's SHA-256 and format and the sidecar's SHA-256; an unknown, foreign or altered
  artifact is the same "not found or is invalid". An unreachable store is *not* "not
  found": it is ``store_unavailable`` (retryable), so a client retries instead of
  believing the image is gone.
- **Nothing is never cleaned.** A process killed between the image and its marker (or
  between a sidecar and the marker naming it) leaves an object no marker names;
  :meth:`~S3ArtifactStore.cleanup` and :meth:`~S3ArtifactStore.repair_orphans` remove
  such objects once older than the grace period, and abort incomplete multipart uploads
  older than ``stale_upload_secs``.

Differences from the filesystem: each artifact has its own key, so a requested
``filename`` can never collide and ``collision`` never applies; there is no local path.
The work lives beside this module with the filesystem twin's file names:
:mod:`.publish`, :mod:`.reads`, :mod:`.sidecars`, :mod:`.maintenance` (delete,
retention), :mod:`.repair`, :mod:`.leftovers`, :mod:`.migration`, :mod:`.markers`,
:mod:`.objects` (the bucket), :mod:`.errors` and :mod:`.links` (presigned URLs).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from imagebridge.artifacts.markers import Marker
from imagebridge.artifacts.naming import is_safe_relative
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
    NOT_FOUND,
    canonical_id,
    check_cleanup,
    check_repair,
    check_thumbnail_edge,
    decode_sidecar,
    encode_sidecar,
    not_found,
    thumbnail,
)
from imagebridge.artifacts.s3 import maintenance, repair
from imagebridge.artifacts.s3.leftovers import DEFAULT_STALE_UPLOAD_SECS
from imagebridge.artifacts.s3.markers import image_key, list_markers
from imagebridge.artifacts.s3.migration import list_all, move_in
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.publish import publish_object
from imagebridge.artifacts.s3.reads import owned_marker, read_content, sidecar_bytes
from imagebridge.artifacts.s3.sidecars import attach_sidecar
from imagebridge.contract.errors import BridgeError
from imagebridge.imaging.inspect import ImageLimits

__all__ = ["DEFAULT_STALE_UPLOAD_SECS", "S3ArtifactStore"]


class S3ArtifactStore:
    """Publishes, reads, cleans up and repairs bridge-owned artifacts in a bucket."""

    def __init__(
        self,
        objects: S3ObjectStore,
        limits: ImageLimits | None = None,
        *,
        clock: Callable[[], float] = time.time,
        stale_upload_secs: int = DEFAULT_STALE_UPLOAD_SECS,
    ) -> None:
        self.objects = objects
        self._limits = limits or ImageLimits()
        self._clock = clock
        self._stale_upload_secs = stale_upload_secs

    @property
    def limits(self) -> ImageLimits:
        return self._limits

    # -- writing ---------------------------------------------------------------------------

    async def publish(self, publication: Publication) -> StoredArtifact:
        """Verify the image and store it; the artifact exists once its marker does."""
        return await publish_object(self.objects, publication, self._limits, self._clock)

    async def attach_metadata(
        self, artifact_id: str, name: str, record: Mapping[str, Any] | bytes
    ) -> str:
        """Store the sidecar and record it in the marker; returns its portable name.

        A second attachment fails; so does any mismatch between ``name`` and the marker.
        """
        canonical = canonical_id(artifact_id)
        if canonical is None or not isinstance(name, str) or not is_safe_relative(name):
            raise BridgeError.artifact("artifact identity is invalid")
        encoded = encode_sidecar(record)
        return await attach_sidecar(self.objects, canonical, name, encoded, self._limits)

    async def import_artifact(
        self, marker: Marker, data: bytes, sidecar: Mapping[str, Any] | None = None
    ) -> bool:
        """Store an artifact of another store under its own id, name, owner and time.

        Resumable: an artifact already here with the same SHA-256 and a verified image is
        left alone (``False``). The copy is read back and verified before ``True``.
        """
        if not await move_in(self.objects, marker, data, sidecar, self._limits):
            return False
        copied = await self.read(marker.id, None)
        if copied.info.sha256 != marker.sha256:  # pragma: no cover - read verifies it
            raise BridgeError.artifact("the copied artifact does not verify")
        return True

    # -- reading ---------------------------------------------------------------------------

    async def read(self, artifact_id: str, owner: str | None) -> ArtifactContent:
        """Verified bytes of an artifact owned by ``owner`` (``None``: trusted local caller)."""
        return await read_content(self.objects, artifact_id, owner, self._limits)

    async def read_sidecar(self, artifact_id: str, owner: str | None) -> dict[str, Any] | None:
        """The verified metadata sidecar of an owned artifact, or ``None`` if it has none."""
        content = await self.read(artifact_id, owner)
        if content.sidecar_name is None:
            return None
        marker = await owned_marker(self.objects, artifact_id, owner)
        encoded = await sidecar_bytes(self.objects, marker)
        if encoded is None:
            raise not_found()
        return decode_sidecar(encoded)

    async def thumbnail(self, artifact_id: str, owner: str | None, edge: int) -> bytes:
        """A PNG thumbnail of an owned artifact, fitting ``edge``×``edge`` (32..2048)."""
        check_thumbnail_edge(edge)
        content = await self.read(artifact_id, owner)
        return await asyncio.to_thread(thumbnail, content.data, edge, self._limits)

    async def presigned_link(self, artifact_id: str, name: str, expires_secs: int) -> str:
        """A credential-free URL of a just-published artifact's image (no read-back: the
        publication verified it), for ``artifacts.url_mode = "presigned"``."""
        return await self.objects.presign_get(image_key(artifact_id, name), expires_secs)

    async def presigned_url(self, artifact_id: str, owner: str | None, expires_secs: int) -> str:
        """A credential-free URL of a verified owned artifact's image, for redirects."""
        content = await self.read(artifact_id, owner)
        return await self.objects.presign_get(image_key(content.id, content.name), expires_secs)

    async def markers(self, max_scan: int) -> tuple[list[Marker | None], bool]:
        """Up to ``max_scan`` parsed markers in key order (``None`` for an invalid one),
        and whether more exist: what a migration out of the bucket walks."""
        return await list_all(self.objects, max_scan)

    async def verify(self, max_scan: int) -> tuple[int, int, list[str], bool]:
        """Read back every artifact (up to ``max_scan``) against its recorded hashes:
        (scanned, verified, ids that fail, whether the scan limit was reached)."""
        listed, reached = await list_markers(self.objects, max_scan)
        verified = 0
        failed: list[str] = []
        for marker_id, marker in listed:
            try:
                if marker is None:
                    raise not_found()
                await self.read(marker.id, None)
            except BridgeError as error:
                if not error.details.get("reason") and error.message == NOT_FOUND:
                    failed.append(marker_id)
                    continue
                raise
            verified += 1
        return len(listed), verified, failed, reached

    # -- removing --------------------------------------------------------------------------

    async def delete(self, artifact_id: str, owner: str | None) -> None:
        """Remove an owned, verified artifact's objects (``not found`` like :meth:`read`
        for an unknown, foreign or altered one, which is left alone).

        The marker goes first, so the artifact is gone for every instance at once; a
        crash after it leaves objects no marker names, which the sweep removes.
        """
        await maintenance.delete_artifact(self.objects, artifact_id, owner, self._limits)

    async def cleanup(
        self,
        now: float | None = None,
        *,
        max_age_secs: int = DEFAULT_MAX_AGE_SECS,
        max_artifacts: int | None = None,
        max_scan_entries: int = DEFAULT_MAX_SCAN_ENTRIES,
        stale_temp_secs: int = DEFAULT_STALE_TEMP_SECS,
    ) -> CleanupReport:
        """Delete owned artifacts older than ``max_age_secs`` or beyond the newest
        ``max_artifacts`` (looking at no more than ``max_scan_entries`` markers), after
        removing crash leftovers older than ``stale_temp_secs``."""
        check_cleanup(max_age_secs, max_artifacts, max_scan_entries, stale_temp_secs)
        return await maintenance.cleanup(
            self.objects,
            self._limits,
            now=self._clock() if now is None else now,
            max_age_secs=max_age_secs,
            max_artifacts=max_artifacts,
            max_scan_entries=max_scan_entries,
            stale_temp_secs=stale_temp_secs,
            stale_upload_secs=self._stale_upload_secs,
            clock=self._clock,
        )

    async def repair_orphans(
        self,
        max_scan: int,
        *,
        apply: bool,
        now: float | None = None,
        stale_temp_secs: int = DEFAULT_STALE_TEMP_SECS,
    ) -> RepairReport:
        """Audit (``apply=False``) or repair: a marker whose image is gone is removed (with
        its sidecar); a marker whose sidecar is gone has the reference cleared; objects no
        marker names and stale uploads are counted, and removed when applying."""
        check_repair(max_scan, stale_temp_secs)
        return await repair.repair_orphans(
            self.objects,
            self._limits,
            max_scan=max_scan,
            apply=apply,
            now=self._clock() if now is None else now,
            stale_temp_secs=stale_temp_secs,
            stale_upload_secs=self._stale_upload_secs,
            clock=self._clock,
        )
