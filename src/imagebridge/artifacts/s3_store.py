"""The artifact store on an S3-compatible bucket: the filesystem store's rules, on objects.

Chosen by ``artifacts.backend = "s3"`` (``application/artifact_backend.py``). It offers
the awaitable operations of :class:`~imagebridge.artifacts.async_store.AsyncArtifactStore`
with the same guarantees, under the key prefix of its :class:`~.s3.S3ObjectStore`::

    ownership/<id>.json          the marker (the filesystem store's format, ≤ 4 KiB)
    images/<id>/<name>           the image
    metadata/<id>.json           the optional sidecar (≤ 1 MiB JSON object)

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
  :meth:`cleanup` and :meth:`repair_orphans` remove such objects once older than the
  grace period, and abort incomplete multipart uploads older than ``stale_upload_secs``.

Differences from the filesystem: each artifact has its own key, so a requested
``filename`` can never collide and ``collision`` never applies; there is no local path.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from imagebridge.artifacts.markers import MAX_MARKER_BYTES, Marker, parse_marker
from imagebridge.artifacts.naming import is_safe_relative
from imagebridge.artifacts.publication import Publication, plan_publication
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
    MAX_SIDECAR_BYTES,
    NOT_FOUND,
    artifact_error,
    canonical_id,
    check_cleanup,
    check_repair,
    check_thumbnail_edge,
    decode_sidecar,
    encode_sidecar,
    is_json_object,
    not_found,
    retention_victims,
    sidecar_name,
    thumbnail,
)
from imagebridge.artifacts.s3 import ObjectInfo, S3ObjectStore
from imagebridge.artifacts.s3_errors import NOT_FOUND as NOT_FOUND_REASON
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.crash_points import crash_point
from imagebridge.imaging.ids import canonical_uuid
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, inspect_image

__all__ = ["DEFAULT_STALE_UPLOAD_SECS", "S3ArtifactStore"]

DEFAULT_STALE_UPLOAD_SECS = 24 * 60 * 60
_OWNERSHIP = "ownership/"
_IMAGES = "images/"
_METADATA = "metadata/"


def _is_not_found(error: BridgeError) -> bool:
    return error.details.get("reason") == NOT_FOUND_REASON


def _write_fault(error: BridgeError) -> BridgeError:
    """A write the bucket did not take, marked as the artifact storage's fault
    (``details.storage``), so a billed image is delivered inline as on a full disk."""
    if error.code is not ErrorCode.ARTIFACT or error.details.get("reason") in (None, "invalid_key"):
        return error
    return BridgeError(
        error.code,
        error.message,
        retryable=error.retryable,
        details={**error.details, "storage": "artifacts"},
        suggestions=error.suggestions,
    )


def _image_key(marker_id: str, name: str) -> str:
    return f"{_IMAGES}{marker_id}/{name}"


def _sidecar_key(marker_id: str) -> str:
    return f"{_METADATA}{marker_id}.json"


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

    # -- publish ---------------------------------------------------------------------------

    async def publish(self, publication: Publication) -> StoredArtifact:
        """Verify the image and store it; the artifact exists once its marker does."""
        plan = await asyncio.to_thread(plan_publication, publication, self._limits)
        name = plan.name()
        marker = plan.marker(name, publication.owner, int(self._clock()))
        image_key = _image_key(plan.artifact_id, name)
        try:
            await self.objects.put(
                image_key, publication.data, content_type=plan.info.format.media_type
            )
        except BridgeError as error:
            raise _write_fault(error) from error
        crash_point("s3.image_uploaded")
        try:
            await self._put_marker(marker)
        except BaseException as exc:
            with contextlib.suppress(BridgeError):
                await asyncio.shield(self.objects.delete(image_key))
            if isinstance(exc, BridgeError):
                raise _write_fault(exc) from exc
            raise
        return StoredArtifact(plan.artifact_id, name, plan.info)

    async def _put_marker(self, marker: Marker) -> None:
        encoded = marker.encode()
        if len(encoded) > MAX_MARKER_BYTES:
            raise artifact_error("artifact ownership record is too large")
        await self.objects.put(
            f"{_OWNERSHIP}{marker.id}.json", encoded, content_type="application/json"
        )

    # -- reading ---------------------------------------------------------------------------

    async def _get_bounded(self, key: str, limit: int) -> bytes | None:
        """The object's bytes, ``None`` when absent or larger than ``limit``."""
        try:
            stream = await self.objects.get(key)
        except BridgeError as error:
            if _is_not_found(error):
                return None
            raise
        async with stream:
            if stream.info.size > limit:
                return None
            return await stream.read(limit)

    async def _load_marker(self, marker_id: str) -> Marker | None:
        encoded = await self._get_bounded(f"{_OWNERSHIP}{marker_id}.json", MAX_MARKER_BYTES)
        return None if encoded is None else parse_marker(encoded, f"{marker_id}.json")

    async def _read_image(self, marker: Marker) -> tuple[bytes, ImageInfo] | None:
        data = await self._get_bounded(
            _image_key(marker.id, marker.name), self._limits.max_encoded_bytes
        )
        if data is None:
            return None

        def verify() -> ImageInfo | None:
            if hashlib.sha256(data).hexdigest() != marker.sha256:
                return None
            try:
                return inspect_image(data, self._limits)
            except BridgeError:
                return None

        info = await asyncio.to_thread(verify)
        return None if info is None else (data, info)

    async def _sidecar_bytes(self, marker: Marker) -> bytes | None:
        """The recorded sidecar if present and unchanged, else ``None``."""
        encoded = await self._get_bounded(_sidecar_key(marker.id), MAX_SIDECAR_BYTES)
        if encoded is None:
            return None
        if hashlib.sha256(encoded).hexdigest() != marker.sidecar_sha256 or not is_json_object(
            encoded
        ):
            return None
        return encoded

    async def _owned_marker(self, artifact_id: str, owner: str | None) -> Marker:
        canonical = canonical_id(artifact_id)
        if canonical is None:
            raise not_found()
        marker = await self._load_marker(canonical)
        if marker is None or (owner is not None and marker.effective_owner != owner):
            raise not_found()
        return marker

    async def read(self, artifact_id: str, owner: str | None) -> ArtifactContent:
        """Verified bytes of an artifact owned by ``owner`` (``None``: trusted local caller)."""
        marker = await self._owned_marker(artifact_id, owner)
        loaded = await self._read_image(marker)
        if loaded is None:
            raise not_found()
        if marker.sidecar_name is not None and await self._sidecar_bytes(marker) is None:
            raise not_found()
        data, info = loaded
        return ArtifactContent(marker.id, marker.name, data, info, marker.sidecar_name)

    async def read_sidecar(self, artifact_id: str, owner: str | None) -> dict[str, Any] | None:
        """The verified metadata sidecar of an owned artifact, or ``None`` if it has none."""
        content = await self.read(artifact_id, owner)
        if content.sidecar_name is None:
            return None
        marker = await self._owned_marker(artifact_id, owner)
        encoded = await self._sidecar_bytes(marker)
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
        return await self.objects.presign_get(_image_key(artifact_id, name), expires_secs)

    async def presigned_url(self, artifact_id: str, owner: str | None, expires_secs: int) -> str:
        """A credential-free URL of a verified owned artifact's image, for redirects."""
        content = await self.read(artifact_id, owner)
        return await self.objects.presign_get(_image_key(content.id, content.name), expires_secs)

    # -- sidecar metadata ------------------------------------------------------------------

    async def attach_metadata(
        self, artifact_id: str, name: str, record: Mapping[str, Any] | bytes
    ) -> str:
        """Store the sidecar and record it in the marker; returns its portable name.

        A second attachment fails; so does any mismatch between ``name`` and the marker.
        """
        canonical = canonical_id(artifact_id)
        if canonical is None or not isinstance(name, str) or not is_safe_relative(name):
            raise artifact_error("artifact identity is invalid")
        encoded = encode_sidecar(record)
        marker = await self._load_marker(canonical)
        if (
            marker is None
            or marker.name != name
            or marker.sidecar_name is not None
            or await self._read_image(marker) is None
        ):
            raise artifact_error("artifact metadata cannot be attached to this artifact")
        named = sidecar_name(name, canonical)
        key = _sidecar_key(canonical)
        try:
            await self.objects.put(key, encoded, content_type="application/json")
        except BridgeError as error:
            raise _write_fault(error) from error
        crash_point("s3.sidecar_uploaded")
        updated = marker.with_sidecar(named, hashlib.sha256(encoded).hexdigest())
        try:
            await self._put_marker(updated)
        except BaseException as exc:
            with contextlib.suppress(BridgeError):
                await asyncio.shield(self.objects.delete(key))
            if isinstance(exc, BridgeError):
                raise _write_fault(exc) from exc
            raise
        return named

    # -- moving in and checking -----------------------------------------------------------

    async def import_artifact(
        self, marker: Marker, data: bytes, sidecar: Mapping[str, Any] | None = None
    ) -> bool:
        """Store an artifact of another store under its own id, name, owner and time.

        Resumable: an artifact already here with the same SHA-256 and a verified image is
        left alone (``False``). The copy is read back and verified before ``True``.
        """
        if hashlib.sha256(data).hexdigest() != marker.sha256:
            raise artifact_error("artifact bytes do not match their recorded SHA-256")
        existing = await self._load_marker(marker.id)
        if (
            existing is not None
            and existing.sha256 == marker.sha256
            and await self._read_image(existing) is not None
        ):
            return False
        info = await asyncio.to_thread(inspect_image, data, self._limits)
        await self.objects.put(
            _image_key(marker.id, marker.name), data, content_type=info.format.media_type
        )
        stored = marker.with_sidecar(None, None)
        if sidecar is not None:
            encoded = encode_sidecar(sidecar)
            await self.objects.put(
                _sidecar_key(marker.id), encoded, content_type="application/json"
            )
            stored = stored.with_sidecar(
                sidecar_name(marker.name, marker.id), hashlib.sha256(encoded).hexdigest()
            )
        await self._put_marker(stored)
        copied = await self.read(marker.id, None)
        if copied.info.sha256 != marker.sha256:  # pragma: no cover - read verifies it
            raise artifact_error("the copied artifact does not verify")
        return True

    async def markers(self, max_scan: int) -> tuple[list[Marker | None], bool]:
        """Up to ``max_scan`` parsed markers in key order (``None`` for an invalid one),
        and whether more exist: what a migration out of the bucket walks."""
        listed, reached = await self._markers(max_scan)
        return [marker for _marker_id, marker in listed], reached

    async def verify(self, max_scan: int) -> tuple[int, int, list[str], bool]:
        """Read back every artifact (up to ``max_scan``) against its recorded hashes:
        (scanned, verified, ids that fail, whether the scan limit was reached)."""
        listed, reached = await self._markers(max_scan)
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

    # -- retention and repair --------------------------------------------------------------

    async def _markers(self, limit: int) -> tuple[list[tuple[str, Marker | None]], bool]:
        """Up to ``limit`` (marker id, parsed marker or ``None``), and whether more exist."""
        listed = await self.objects.list_objects(_OWNERSHIP, limit=limit + 1)
        reached = len(listed) > limit
        found: list[tuple[str, Marker | None]] = []
        for item in listed[:limit]:
            filename = item.key[len(_OWNERSHIP) :]
            marker_id = filename.removesuffix(".json")
            found.append((marker_id, await self._load_marker(marker_id)))
        return found, reached

    async def _remove(self, marker: Marker) -> None:
        """Sidecar, image, then marker: a crash part-way leaves a marker the repair fixes."""
        if marker.sidecar_name is not None:
            await self.objects.delete(_sidecar_key(marker.id))
        await self.objects.delete(_image_key(marker.id, marker.name))
        await self.objects.delete(f"{_OWNERSHIP}{marker.id}.json")

    async def delete(self, artifact_id: str, owner: str | None) -> None:
        """Remove an owned, verified artifact's objects (``not found`` like :meth:`read`
        for an unknown, foreign or altered one, which is left alone).

        The marker goes first, so the artifact is gone for every instance at once; a
        crash after it leaves objects no marker names, which the sweep removes.
        """
        content = await self.read(artifact_id, owner)
        try:
            await self.objects.delete(f"{_OWNERSHIP}{content.id}.json")
            crash_point("s3.marker_deleted")
            await self.objects.delete(_image_key(content.id, content.name))
            if content.sidecar_name is not None:
                await self.objects.delete(_sidecar_key(content.id))
        except BridgeError as error:
            raise _write_fault(error) from error

    async def _sweep_unowned(
        self, cutoff: float, limit: int, *, apply: bool
    ) -> tuple[int, int, bool]:
        """Objects no marker names (a crash between an object and its marker) older than
        ``cutoff``, and stale multipart uploads: (found, removed, limit reached)."""
        found = removed = 0
        images = await self.objects.list_objects(_IMAGES, limit=limit + 1)
        sidecars = await self.objects.list_objects(_METADATA, limit=limit + 1)
        reached = len(images) > limit or len(sidecars) > limit
        markers: dict[str, Marker | None] = {}

        async def marker_of(marker_id: str) -> Marker | None:
            if marker_id not in markers:
                canonical = canonical_uuid(marker_id)
                markers[marker_id] = (
                    await self._load_marker(canonical) if canonical == marker_id else None
                )
            return markers[marker_id]

        async def consider(item: ObjectInfo, owned: bool) -> None:
            nonlocal found, removed
            if owned or item.last_modified > cutoff:
                return
            found += 1
            if apply:
                await self.objects.delete(item.key)
                removed += 1

        for item in images[:limit]:
            marker_id, _, rest = item.key[len(_IMAGES) :].partition("/")
            marker = await marker_of(marker_id)
            await consider(item, marker is not None and rest == marker.name)
        for item in sidecars[:limit]:
            marker_id = item.key[len(_METADATA) :].removesuffix(".json")
            marker = await marker_of(marker_id)
            await consider(item, marker is not None and marker.sidecar_name is not None)
        uploads = await self.objects.incomplete_uploads(limit=limit)
        moment = self._clock()
        stale = [u for u in uploads if moment - u.initiated >= self._stale_upload_secs]
        found += len(stale)
        if apply and stale:
            removed += await self.objects.abort_stale_uploads(
                self._stale_upload_secs, limit=limit, now=moment
            )
        return found, removed, reached or len(uploads) >= limit

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
        current = self._clock() if now is None else now
        cutoff = int(current) - max_age_secs
        report = CleanupReport()
        (
            report.stale_temp_files,
            report.stale_temp_files_removed,
            report.temp_scan_limit_reached,
        ) = await self._sweep_unowned(current - stale_temp_secs, max_scan_entries, apply=True)
        listed, report.scan_limit_reached = await self._markers(max_scan_entries)
        report.scanned = len(listed)
        valid: list[Marker] = []
        for _marker_id, marker in listed:
            if marker is None or await self._read_image(marker) is None:
                report.skipped += 1
            else:
                valid.append(marker)
        for marker in retention_victims(valid, cutoff, max_artifacts):
            await self._remove(marker)
            report.deleted += 1
        return report

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
        current = self._clock() if now is None else now
        report = RepairReport()
        (
            report.stale_temp_files,
            report.stale_temp_files_removed,
            report.temp_scan_limit_reached,
        ) = await self._sweep_unowned(current - stale_temp_secs, max_scan, apply=apply)
        listed, report.scan_limit_reached = await self._markers(max_scan)
        report.scanned = len(listed)
        for _marker_id, marker in listed:
            if marker is None:
                report.skipped += 1
                continue
            image = await self.objects.head(_image_key(marker.id, marker.name))
            sidecar_ok = marker.sidecar_name is None or (
                await self._sidecar_bytes(marker) is not None
            )
            if image is not None and await self._read_image(marker) is not None:
                if sidecar_ok:
                    report.healthy += 1
                elif await self.objects.head(_sidecar_key(marker.id)) is None:
                    report.missing_sidecars += 1
                    if apply:
                        await self._put_marker(marker.with_sidecar(None, None))
                        report.repaired += 1
                else:
                    report.skipped += 1  # a changed sidecar: never touched
            elif image is None:
                report.orphaned_records += 1
                if not sidecar_ok and await self.objects.head(_sidecar_key(marker.id)):
                    report.skipped += 1  # a changed sidecar: never touched
                elif apply:
                    await self._remove(marker)
                    report.repaired += 1
            else:
                report.skipped += 1  # a changed image: never touched
        return report
