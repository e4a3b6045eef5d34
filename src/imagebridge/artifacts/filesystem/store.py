"""The filesystem artifact store: verified images published atomically below one owned root.

Layout::

    <root>/                                  canonical, created if missing
      .imagegen-bridge-ownership/<id>.json   one marker per artifact (≤ 4 KiB, strict)
      [directory/]<name>.<ext>               the image, never overwritten
      [directory/]metadata-<id>.json         optional sidecar (≤ 1 MiB JSON object)

Only files named by a valid marker whose recorded SHA-256 still matches are ever read
back, delivered or deleted: a file the bridge did not write, or one replaced since, is
left alone. Paths are walked component by component without following symlinks.

Ownership scope: each marker records ``owner``, the auth scope of the caller that
created it (``anonymous-local``, ``bearer:<sha256>`` …). :meth:`ArtifactStore.read`
with a different owner fails exactly like an unknown id. Markers written by the
original (no ``owner``) belong to :data:`~imagebridge.artifacts.markers.LEGACY_OWNER`.

Crash leftovers: every file is first written to a hidden ``.imagegen-bridge-tmp-<hex>``
file and then linked to its name. A process killed in between leaves that temp file
behind; :meth:`ArtifactStore.cleanup` and :meth:`ArtifactStore.repair_orphans` remove
such files once they are older than a grace period (a live writer's file is never that
old), looking only in the root, the ownership directory and directories a publication
could have created.

:class:`ArtifactStore` is synchronous and thread-safe (every operation is a sequence of
atomic filesystem calls); :class:`AsyncArtifactStore` is the same store for async code
(the :class:`~imagebridge.artifacts.interfaces.ArtifactBackend`), each call in a worker
thread. The work itself lives beside this module, one job each, with the same file names
as the S3 twin: :mod:`.publish`, :mod:`.reads`, :mod:`.sidecars`, :mod:`.maintenance`
(delete, retention), :mod:`.repair`, :mod:`.leftovers` (the temp-file sweep),
:mod:`.migration`, :mod:`.markers` (the ownership directory), :mod:`.objects` (the
directory-fd primitives) and :mod:`.errors` (storage faults).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from imagebridge.artifacts.filesystem import maintenance, objects, repair
from imagebridge.artifacts.filesystem.markers import OWNERSHIP_DIRECTORY
from imagebridge.artifacts.filesystem.migration import check_import, list_markers, move_in
from imagebridge.artifacts.filesystem.objects import Unsafe
from imagebridge.artifacts.filesystem.publish import publish_file
from imagebridge.artifacts.filesystem.reads import read_content, read_sidecar_bytes
from imagebridge.artifacts.filesystem.sidecars import attach_sidecar
from imagebridge.artifacts.markers import Marker
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
    canonical_id,
    check_cleanup,
    check_repair,
    check_thumbnail_edge,
    decode_sidecar,
    encode_sidecar,
    require_id,
    thumbnail,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import STORAGE_HEALTH
from imagebridge.imaging.inspect import ImageLimits

__all__ = ["ArtifactStore", "AsyncArtifactStore"]


class ArtifactStore:
    """Publishes, reads, cleans up and repairs bridge-owned artifacts below ``root``."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        limits: ImageLimits | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._limits = limits or ImageLimits()
        self._clock = clock
        try:
            os.makedirs(root, exist_ok=True)
            canonical = os.path.realpath(root)
            root_fd = objects.open_dir(canonical)
        except OSError as exc:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "artifact root could not be created or opened",
                details={"field": "artifacts.root", "reason": exc.strerror or str(exc)},
            ) from exc
        try:
            own_fd = objects.open_child_dir(root_fd, OWNERSHIP_DIRECTORY, create=True)
            os.close(own_fd)
        except (Unsafe, OSError) as exc:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "artifact ownership root must be a real child directory",
                details={"field": "artifacts.root"},
            ) from exc
        finally:
            os.close(root_fd)
        self._root = Path(canonical)

    @property
    def root(self) -> Path:
        """The canonical root (trusted local code only)."""
        return self._root

    @property
    def limits(self) -> ImageLimits:
        return self._limits

    @contextlib.contextmanager
    def _root_fds(self) -> Iterator[tuple[int, int]]:
        """Yield ``(root_fd, ownership_fd)``; a replaced root or ownership dir is an error."""
        try:
            root_fd = objects.open_dir(str(self._root))
        except OSError as exc:
            raise BridgeError.artifact("artifact root is unavailable") from exc
        try:
            try:
                own_fd = objects.open_child_dir(root_fd, OWNERSHIP_DIRECTORY)
            except (Unsafe, OSError) as exc:
                raise BridgeError.artifact("artifact ownership root is invalid") from exc
            try:
                yield root_fd, own_fd
            finally:
                os.close(own_fd)
        finally:
            os.close(root_fd)

    # -- writing ---------------------------------------------------------------------------

    def publish(self, publication: Publication) -> StoredArtifact:
        """Verify the image and publish it without ever overwriting a file.

        The name is ``directory/filename`` when ``filename`` is given (extension appended
        if missing; with ``collision="suffix"`` a taken name becomes ``name-2.ext`` …),
        else ``<sanitised prefix>-<id>.<ext>``.
        """
        plan = plan_publication(publication, self._limits)
        created_at = int(self._clock())
        with self._root_fds() as (root_fd, own_fd):
            name = publish_file(root_fd, own_fd, publication, plan, created_at)
        STORAGE_HEALTH.succeeded("artifacts")
        return StoredArtifact(plan.artifact_id, name, plan.info)

    def attach_metadata(
        self, artifact_id: str, name: str, record: Mapping[str, Any] | bytes
    ) -> str:
        """Write ``metadata-<id>.json`` beside the artifact and record it in the marker.

        Returns the sidecar's portable name. A second attachment fails; so does any
        mismatch between ``name`` and the marker.
        """
        canonical = canonical_id(artifact_id)
        if canonical is None or not isinstance(name, str) or not is_safe_relative(name):
            raise BridgeError.artifact("artifact identity is invalid")
        encoded = encode_sidecar(record)
        with self._root_fds() as (root_fd, own_fd):
            named = attach_sidecar(root_fd, own_fd, canonical, name, encoded, self._limits)
        STORAGE_HEALTH.succeeded("artifacts")
        return named

    def import_artifact(
        self, marker: Marker, data: bytes, sidecar: Mapping[str, Any] | None = None
    ) -> bool:
        """Store an artifact of another store under its own id, name, owner and time.

        Published like any artifact (temp file, marker, no-clobber name), then its sidecar
        attached and the copy read back. Resumable: an artifact already here with the same
        SHA-256 and verified bytes is left alone (``False``; a sidecar a crash left out
        is attached). A name already taken by another file is refused, never overwritten.
        """
        check_import(marker, data, self._limits)
        with self._root_fds() as (root_fd, own_fd):
            present, existing = move_in(root_fd, own_fd, marker, data, self._limits)
        added = False
        if sidecar is not None and (existing is None or existing.sidecar_name is None):
            self.attach_metadata(marker.id, marker.name, sidecar)
            added = True
        copied = self.read(marker.id, None)
        if copied.info.sha256 != marker.sha256:  # pragma: no cover - read verifies it
            raise BridgeError.artifact("the copied artifact does not verify")
        return not present or added

    # -- reading ---------------------------------------------------------------------------

    def read(self, artifact_id: str, owner: str | None) -> ArtifactContent:
        """Verified bytes of an artifact owned by ``owner``.

        ``owner=None`` is for trusted local callers (CLI, engine internals) and skips the
        scope check. Unknown, foreign, tampered and invalid artifacts all fail with the
        same ``artifact`` error, "artifact was not found or is invalid".
        """
        canonical = require_id(artifact_id)
        with self._root_fds() as (root_fd, own_fd):
            return read_content(root_fd, own_fd, canonical, owner, self._limits)

    def read_sidecar(self, artifact_id: str, owner: str | None) -> dict[str, Any] | None:
        """The verified metadata sidecar of an owned artifact, or ``None`` if it has none."""
        content = self.read(artifact_id, owner)
        if content.sidecar_name is None:
            return None
        with self._root_fds() as (root_fd, _own_fd):
            encoded = read_sidecar_bytes(root_fd, content.sidecar_name)
        return decode_sidecar(encoded)

    def local_path(self, artifact_id: str, owner: str | None) -> Path:
        """Canonical path of a verified artifact, for local callers (``--local-artifact-paths``)."""
        content = self.read(artifact_id, owner)
        return self._root / content.name

    def thumbnail(self, artifact_id: str, owner: str | None, edge: int) -> bytes:
        """A PNG thumbnail of an owned artifact, fitting ``edge``×``edge`` (32..2048)."""
        check_thumbnail_edge(edge)
        content = self.read(artifact_id, owner)
        return thumbnail(content.data, edge, self._limits)

    def markers(self, max_scan: int) -> tuple[list[Marker | None], bool]:
        """Up to ``max_scan`` parsed markers by file name (``None`` for an invalid one), and
        whether more exist: what a migration out of the root walks."""
        with self._root_fds() as (_root_fd, own_fd):
            return list_markers(own_fd, max_scan)

    # -- removing --------------------------------------------------------------------------

    def delete(self, artifact_id: str, owner: str | None) -> None:
        """Remove a verified artifact owned by ``owner``: its image, sidecar and marker.

        Unknown, foreign and altered artifacts fail like :meth:`read` and are left alone.
        """
        canonical = require_id(artifact_id)
        with self._root_fds() as (root_fd, own_fd):
            maintenance.delete_artifact(root_fd, own_fd, canonical, owner, self._limits)

    def cleanup(
        self,
        now: float | None = None,
        *,
        max_age_secs: int = DEFAULT_MAX_AGE_SECS,
        max_artifacts: int | None = None,
        max_scan_entries: int = DEFAULT_MAX_SCAN_ENTRIES,
        stale_temp_secs: int = DEFAULT_STALE_TEMP_SECS,
    ) -> CleanupReport:
        """Delete verified owned artifacts older than ``max_age_secs`` or beyond the newest
        ``max_artifacts``, looking at no more than ``max_scan_entries`` markers.

        Temp files left by a crash and older than ``stale_temp_secs`` are removed first,
        examining no more than ``max_scan_entries`` directory entries.
        """
        check_cleanup(max_age_secs, max_artifacts, max_scan_entries, stale_temp_secs)
        current = self._clock() if now is None else now
        with self._root_fds() as (root_fd, own_fd):
            return maintenance.cleanup(
                root_fd,
                own_fd,
                self._limits,
                now=current,
                max_age_secs=max_age_secs,
                max_artifacts=max_artifacts,
                max_scan_entries=max_scan_entries,
                stale_temp_secs=stale_temp_secs,
            )

    def repair_orphans(
        self,
        max_scan: int,
        *,
        apply: bool,
        now: float | None = None,
        stale_temp_secs: int = DEFAULT_STALE_TEMP_SECS,
    ) -> RepairReport:
        """Audit (``apply=False``) or repair provably safe ownership inconsistencies.

        A marker whose artifact is gone is removed (with its unchanged sidecar); a
        marker whose sidecar is gone has the reference cleared. Anything changed or
        invalid is skipped and never modified. Crash-leftover temp files older than
        ``stale_temp_secs`` are counted, and removed when applying.
        """
        check_repair(max_scan, stale_temp_secs)
        current = self._clock() if now is None else now
        with self._root_fds() as (root_fd, own_fd):
            return repair.repair_orphans(
                root_fd,
                own_fd,
                self._limits,
                max_scan=max_scan,
                apply=apply,
                now=current,
                stale_temp_secs=stale_temp_secs,
            )


class AsyncArtifactStore:
    """The same store for async code: awaitable methods of the same names, each run in a
    worker thread, so the event loop never waits on the disk."""

    def __init__(self, store: ArtifactStore) -> None:
        self.sync = store

    @property
    def root(self) -> Path:
        return self.sync.root

    async def publish(self, publication: Publication) -> StoredArtifact:
        return await asyncio.to_thread(self.sync.publish, publication)

    async def attach_metadata(
        self, artifact_id: str, name: str, record: Mapping[str, Any] | bytes
    ) -> str:
        return await asyncio.to_thread(self.sync.attach_metadata, artifact_id, name, record)

    async def read(self, artifact_id: str, owner: str | None) -> ArtifactContent:
        return await asyncio.to_thread(self.sync.read, artifact_id, owner)

    async def read_sidecar(self, artifact_id: str, owner: str | None) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.sync.read_sidecar, artifact_id, owner)

    async def delete(self, artifact_id: str, owner: str | None) -> None:
        await asyncio.to_thread(self.sync.delete, artifact_id, owner)

    async def thumbnail(self, artifact_id: str, owner: str | None, edge: int) -> bytes:
        return await asyncio.to_thread(self.sync.thumbnail, artifact_id, owner, edge)

    async def cleanup(
        self,
        now: float | None = None,
        *,
        max_age_secs: int = DEFAULT_MAX_AGE_SECS,
        max_artifacts: int | None = None,
        max_scan_entries: int = DEFAULT_MAX_SCAN_ENTRIES,
        stale_temp_secs: int = DEFAULT_STALE_TEMP_SECS,
    ) -> CleanupReport:
        return await asyncio.to_thread(
            lambda: self.sync.cleanup(
                now,
                max_age_secs=max_age_secs,
                max_artifacts=max_artifacts,
                max_scan_entries=max_scan_entries,
                stale_temp_secs=stale_temp_secs,
            )
        )

    async def repair_orphans(
        self,
        max_scan: int,
        *,
        apply: bool,
        now: float | None = None,
        stale_temp_secs: int = DEFAULT_STALE_TEMP_SECS,
    ) -> RepairReport:
        return await asyncio.to_thread(
            lambda: self.sync.repair_orphans(
                max_scan, apply=apply, now=now, stale_temp_secs=stale_temp_secs
            )
        )
