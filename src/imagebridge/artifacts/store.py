"""The artifact store: verified images published atomically below one owned root.

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
original (no ``owner``) belong to :data:`LEGACY_OWNER`.

Crash leftovers: every file is first written to a hidden ``.imagegen-bridge-tmp-<hex>``
file and then linked to its name. A process killed in between leaves that temp file
behind; :meth:`ArtifactStore.cleanup` and :meth:`ArtifactStore.repair_orphans` remove
such files once they are older than a grace period (a live writer's file is never that
old), looking only in the root, the ownership directory and directories a publication
could have created.

Threading: the store is synchronous and thread-safe (every operation is a sequence of
atomic filesystem calls). Async code holds an
:class:`~imagebridge.artifacts.async_store.AsyncArtifactStore`. Markers live in
:mod:`.markers`, the crash-leftover sweep in :mod:`.temp_sweep`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from imagebridge.artifacts import _fs
from imagebridge.artifacts._fs import PathState, Unsafe
from imagebridge.artifacts.markers import (
    LEGACY_OWNER,
    MAX_MARKER_BYTES,
    Marker,
    parse_marker,
    valid_owner,
)
from imagebridge.artifacts.naming import (
    is_safe_filename,
    is_safe_relative,
    suffixed_filename,
)
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
    MIN_STALE_TEMP_SECS,
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
from imagebridge.artifacts.temp_sweep import sweep_stale_temps
from imagebridge.contract.enums import ArtifactCollisionPolicy
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.crash_points import crash_point
from imagebridge.engine.storage_faults import STORAGE_HEALTH, disk_fault, disk_fault_reason
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, inspect_image

__all__ = [
    "DEFAULT_STALE_TEMP_SECS",
    "LEGACY_OWNER",
    "MAX_COLLISION_ATTEMPTS",
    "MAX_MARKER_BYTES",
    "MAX_SIDECAR_BYTES",
    "MIN_STALE_TEMP_SECS",
    "OWNERSHIP_DIRECTORY",
    "ArtifactContent",
    "ArtifactStore",
    "CleanupReport",
    "RepairReport",
    "StoredArtifact",
]

OWNERSHIP_DIRECTORY = ".imagegen-bridge-ownership"
MAX_COLLISION_ATTEMPTS = 10_000
_ARTIFACT_MODE = 0o666  # narrowed by the process umask, like any file a tool writes
_MARKER_MODE = 0o600


def _write_error(message: str, exc: BaseException, **details: Any) -> BridgeError:
    """A failed write: a storage fault (full disk, I/O error, read-only) says so in
    ``details.reason``; anything else keeps the plain ``artifact`` error."""
    reason = disk_fault_reason(exc)
    if reason is not None:
        return disk_fault(ErrorCode.ARTIFACT, message, reason, "artifacts", retryable=False)
    return artifact_error(message, **details)


def _taken(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


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
            root_fd = _fs.open_dir(canonical)
        except OSError as exc:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "artifact root could not be created or opened",
                details={"field": "artifacts.root", "reason": exc.strerror or str(exc)},
            ) from exc
        try:
            own_fd = _fs.open_child_dir(root_fd, OWNERSHIP_DIRECTORY, create=True)
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

    # -- descriptors -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _root_fds(self) -> Iterator[tuple[int, int]]:
        """Yield ``(root_fd, ownership_fd)``; a replaced root or ownership dir is an error."""
        try:
            root_fd = _fs.open_dir(str(self._root))
        except OSError as exc:
            raise artifact_error("artifact root is unavailable") from exc
        try:
            try:
                own_fd = _fs.open_child_dir(root_fd, OWNERSHIP_DIRECTORY)
            except (Unsafe, OSError) as exc:
                raise artifact_error("artifact ownership root is invalid") from exc
            try:
                yield root_fd, own_fd
            finally:
                os.close(own_fd)
        finally:
            os.close(root_fd)

    # -- publish ---------------------------------------------------------------------------

    def publish(self, publication: Publication) -> StoredArtifact:
        """Verify the image and publish it without ever overwriting a file.

        The name is ``directory/filename`` when ``filename`` is given (extension appended
        if missing; with ``collision="suffix"`` a taken name becomes ``name-2.ext`` …),
        else ``<sanitised prefix>-<id>.<ext>``.
        """
        plan = plan_publication(publication, self._limits)
        directory = plan.directory
        attempts = (
            MAX_COLLISION_ATTEMPTS
            if publication.filename is not None and plan.policy is ArtifactCollisionPolicy.SUFFIX
            else 1
        )
        marker = plan.marker("", publication.owner, int(self._clock()))
        with self._root_fds() as (root_fd, own_fd):
            dir_fd = self._publication_dir(root_fd, directory)
            try:
                basename = self._link_new_file(
                    dir_fd, own_fd, publication.data, plan.basename, attempts, marker, directory
                )
                name = plan.name(basename)
                try:
                    _fs.fsync_dir(dir_fd)
                except OSError as exc:
                    self._unpublish(dir_fd, basename)
                    self._withdraw_marker(own_fd, plan.artifact_id)
                    raise _write_error("could not sync the artifact directory", exc) from exc
            finally:
                os.close(dir_fd)
        STORAGE_HEALTH.succeeded("artifacts")
        return StoredArtifact(plan.artifact_id, name, plan.info)

    @staticmethod
    def _unpublish(dir_fd: int, basename: str) -> None:
        """Remove a just-linked artifact whose publication could not be completed."""
        _fs.remove_quietly(dir_fd, basename)
        with contextlib.suppress(OSError):
            _fs.fsync_dir(dir_fd)

    def _publication_dir(self, root_fd: int, directory: str | None) -> int:
        if directory is None:
            return os.dup(root_fd)
        fd = os.dup(root_fd)
        try:
            for component in directory.split("/"):
                child = _fs.open_child_dir(fd, component, create=True)
                os.close(fd)
                fd = child
        except Unsafe as exc:
            os.close(fd)
            raise artifact_error(
                "output directory component must not be a file or symlink"
            ) from exc
        except OSError as exc:
            os.close(fd)
            raise _write_error("could not create output directory component", exc) from exc
        return fd

    def _link_new_file(
        self,
        dir_fd: int,
        own_fd: int,
        data: bytes,
        requested: str,
        attempts: int,
        marker: Marker,
        directory: str | None,
    ) -> str:
        """Write ``data`` to a temp file, record the marker naming the candidate, then link
        the candidate name: the marker is durable before the name exists, so a crash at any
        step leaves a temp file (removed after the grace) or a marker without its file
        (removed by :meth:`repair_orphans`), never a file nobody owns. Publishers share the
        ownership directory's lock from marker to name; repair takes it alone."""
        try:
            temp = _fs.write_temp(dir_fd, data, _ARTIFACT_MODE)
        except OSError as exc:
            raise _write_error("could not write artifact", exc) from exc
        crash_point("artifact.temp_written")
        try:
            with _fs.locked(own_fd, exclusive=False):
                linked = self._name_new_file(
                    dir_fd, own_fd, temp, requested, attempts, marker, directory
                )
        finally:
            _fs.remove_quietly(dir_fd, temp)
        if linked is not None:
            return linked
        if attempts == 1:
            raise artifact_error("artifact file already exists", name=requested)
        raise artifact_error("artifact collision suffix limit was reached", name=requested)

    def _name_new_file(
        self,
        dir_fd: int,
        own_fd: int,
        temp: str,
        requested: str,
        attempts: int,
        marker: Marker,
        directory: str | None,
    ) -> str | None:
        """Record a marker for each candidate name and link it; the name taken, or ``None``
        when every candidate exists (the marker is withdrawn then, and on any failure)."""
        recorded = False
        linked: str | None = None
        try:
            for attempt in range(1, attempts + 1):
                candidate = requested if attempt == 1 else suffixed_filename(requested, attempt)
                if _taken(dir_fd, candidate):
                    continue  # no marker for a name already taken (a link may still race)
                name = f"{directory}/{candidate}" if directory else candidate
                self._write_marker(own_fd, replace(marker, name=name), replace=recorded)
                recorded = True
                crash_point("artifact.marker_written")
                try:
                    if _fs.link_noclobber(dir_fd, temp, candidate):
                        linked = candidate
                        crash_point("artifact.linked")
                        return candidate
                except OSError as exc:
                    raise _write_error("could not publish artifact without overwrite", exc) from exc
            return None
        finally:
            if linked is None and recorded:
                self._withdraw_marker(own_fd, marker.id)

    @staticmethod
    def _withdraw_marker(own_fd: int, artifact_id: str) -> None:
        """Remove the marker of a publication that did not complete."""
        _fs.remove_quietly(own_fd, f"{artifact_id}.json")
        with contextlib.suppress(OSError):
            _fs.fsync_dir(own_fd)

    def _write_marker(self, own_fd: int, marker: Marker, *, replace: bool = False) -> None:
        encoded = marker.encode()
        if len(encoded) > MAX_MARKER_BYTES:
            raise artifact_error("artifact ownership record is too large")
        try:
            temp = _fs.write_temp(own_fd, encoded, _MARKER_MODE)
        except OSError as exc:
            raise _write_error("could not write artifact ownership record", exc) from exc
        target = f"{marker.id}.json"
        try:
            if replace:
                _fs.replace_atomically(own_fd, temp, target)
            elif not _fs.link_noclobber(own_fd, temp, target):
                raise artifact_error("artifact ownership record already exists")
        except OSError as exc:
            raise _write_error("could not publish artifact ownership record", exc) from exc
        finally:
            _fs.remove_quietly(own_fd, temp)
        try:
            _fs.fsync_dir(own_fd)
        except OSError as exc:
            if not replace:  # a new marker that may not survive a crash is withdrawn
                _fs.remove_quietly(own_fd, target)
            raise _write_error("could not sync artifact ownership records", exc) from exc

    # -- reading and verification ----------------------------------------------------------

    def _load_marker(self, own_fd: int, filename: str) -> Marker | None:
        try:
            encoded = _fs.read_regular(own_fd, filename, MAX_MARKER_BYTES)
        except (Unsafe, OSError):
            return None
        return parse_marker(encoded, filename)

    def _read_artifact(self, root_fd: int, marker: Marker) -> tuple[bytes, ImageInfo] | None:
        """The artifact's bytes if they are exactly what was published, else ``None``."""
        try:
            with _fs.open_parent(root_fd, marker.name) as (parent, basename):
                data = _fs.read_regular(parent, basename, self._limits.max_encoded_bytes)
        except (Unsafe, OSError):
            return None
        if hashlib.sha256(data).hexdigest() != marker.sha256:
            return None
        try:
            info = inspect_image(data, self._limits)
        except BridgeError:
            return None
        return data, info

    def _sidecar_state(self, root_fd: int, marker: Marker) -> PathState | None:
        """``None`` when no sidecar is recorded; ``REGULAR`` means present and unchanged."""
        if marker.sidecar_name is None:
            return None
        state = _fs.entry_state(root_fd, marker.sidecar_name)
        if state.state is not PathState.REGULAR:
            return state.state
        try:
            with _fs.open_parent(root_fd, marker.sidecar_name) as (parent, basename):
                encoded = _fs.read_regular(parent, basename, MAX_SIDECAR_BYTES)
        except (Unsafe, OSError):
            return PathState.INVALID
        if hashlib.sha256(encoded).hexdigest() != marker.sidecar_sha256 or not is_json_object(
            encoded
        ):
            return PathState.INVALID
        return PathState.REGULAR

    def _verified(self, root_fd: int, marker: Marker) -> tuple[bytes, ImageInfo] | None:
        loaded = self._read_artifact(root_fd, marker)
        if loaded is None:
            return None
        if self._sidecar_state(root_fd, marker) not in (None, PathState.REGULAR):
            return None
        return loaded

    def read(self, artifact_id: str, owner: str | None) -> ArtifactContent:
        """Verified bytes of an artifact owned by ``owner``.

        ``owner=None`` is for trusted local callers (CLI, engine internals) and skips the
        scope check. Unknown, foreign, tampered and invalid artifacts all fail with the
        same ``artifact`` error, "artifact was not found or is invalid".
        """
        canonical = canonical_id(artifact_id)
        if canonical is None:
            raise not_found()
        with self._root_fds() as (root_fd, own_fd):
            marker = self._load_marker(own_fd, f"{canonical}.json")
            if marker is None or (owner is not None and marker.effective_owner != owner):
                raise not_found()
            loaded = self._verified(root_fd, marker)
        if loaded is None:
            raise not_found()
        data, info = loaded
        return ArtifactContent(marker.id, marker.name, data, info, marker.sidecar_name)

    def read_sidecar(self, artifact_id: str, owner: str | None) -> dict[str, Any] | None:
        """The verified metadata sidecar of an owned artifact, or ``None`` if it has none."""
        content = self.read(artifact_id, owner)
        if content.sidecar_name is None:
            return None
        with self._root_fds() as (root_fd, _own_fd):
            try:
                with _fs.open_parent(root_fd, content.sidecar_name) as (parent, basename):
                    encoded = _fs.read_regular(parent, basename, MAX_SIDECAR_BYTES)
            except (Unsafe, OSError) as exc:
                raise not_found() from exc
        return decode_sidecar(encoded)

    def delete(self, artifact_id: str, owner: str | None) -> None:
        """Remove a verified artifact owned by ``owner``: its image, sidecar and marker.

        Unknown, foreign and altered artifacts fail like :meth:`read` and are left alone.
        The image goes first: a crash part-way leaves a marker naming a missing image,
        which the repair removes with its sidecar, so a deleted artifact never comes back.
        """
        canonical = canonical_id(artifact_id)
        if canonical is None:
            raise not_found()
        with self._root_fds() as (root_fd, own_fd):
            marker = self._load_marker(own_fd, f"{canonical}.json")
            if marker is None or (owner is not None and marker.effective_owner != owner):
                raise not_found()
            if self._verified(root_fd, marker) is None:
                raise not_found()
            try:
                with _fs.open_parent(root_fd, marker.name) as (parent, basename):
                    os.unlink(basename, dir_fd=parent)
                    _fs.fsync_dir(parent)
                if marker.sidecar_name is not None:
                    with _fs.open_parent(root_fd, marker.sidecar_name) as (parent, basename):
                        os.unlink(basename, dir_fd=parent)
                os.unlink(f"{marker.id}.json", dir_fd=own_fd)
                _fs.fsync_dir(own_fd)
            except FileNotFoundError as exc:  # a concurrent delete or cleanup won
                raise not_found() from exc
            except (Unsafe, OSError) as exc:
                raise _write_error("could not delete the artifact", exc) from exc

    def local_path(self, artifact_id: str, owner: str | None) -> Path:
        """Canonical path of a verified artifact, for local callers (``--local-artifact-paths``)."""
        content = self.read(artifact_id, owner)
        return self._root / content.name

    def thumbnail(self, artifact_id: str, owner: str | None, edge: int) -> bytes:
        """A PNG thumbnail of an owned artifact, fitting ``edge``×``edge`` (32..2048)."""
        check_thumbnail_edge(edge)
        content = self.read(artifact_id, owner)
        return thumbnail(content.data, edge, self._limits)

    # -- sidecar metadata ------------------------------------------------------------------

    def attach_metadata(
        self, artifact_id: str, name: str, record: Mapping[str, Any] | bytes
    ) -> str:
        """Write ``metadata-<id>.json`` beside the artifact and record it in the marker.

        Returns the sidecar's portable name. A second attachment fails; so does any
        mismatch between ``name`` and the marker.
        """
        canonical = canonical_id(artifact_id)
        if canonical is None or not isinstance(name, str) or not is_safe_relative(name):
            raise artifact_error("artifact identity is invalid")
        encoded = encode_sidecar(record)
        with self._root_fds() as (root_fd, own_fd):
            marker = self._load_marker(own_fd, f"{canonical}.json")
            if (
                marker is None
                or marker.name != name
                or marker.sidecar_name is not None
                or self._verified(root_fd, marker) is None
            ):
                raise artifact_error("artifact metadata cannot be attached to this artifact")
            named = sidecar_name(name, canonical)
            try:
                with _fs.open_parent(root_fd, name) as (parent, _basename):
                    self._publish_sidecar(
                        parent, own_fd, marker, named.rpartition("/")[2], named, encoded
                    )
            except (Unsafe, OSError) as exc:
                raise _write_error("could not write metadata sidecar", exc) from exc
        STORAGE_HEALTH.succeeded("artifacts")
        return named

    def _publish_sidecar(
        self,
        parent: int,
        own_fd: int,
        marker: Marker,
        basename: str,
        sidecar_name: str,
        encoded: bytes,
    ) -> None:
        """Temp file, then the marker naming the sidecar, then the sidecar's name: a crash
        leaves a temp file or a marker naming a missing sidecar (whose reference
        :meth:`repair_orphans` clears after the grace), never a sidecar nobody owns."""
        temp = _fs.write_temp(parent, encoded, _ARTIFACT_MODE)
        linked = False
        updated = marker.with_sidecar(sidecar_name, hashlib.sha256(encoded).hexdigest())
        try:
            crash_point("sidecar.temp_written")
            with _fs.locked(own_fd, exclusive=False):
                self._write_marker(own_fd, updated, replace=True)
                crash_point("sidecar.marker_written")
                if not _fs.link_noclobber(parent, temp, basename):
                    raise artifact_error("could not publish metadata sidecar without overwrite")
                linked = True
            crash_point("sidecar.linked")
            _fs.fsync_dir(parent)
        except BaseException:
            current = self._load_marker(own_fd, f"{marker.id}.json")
            if current == updated:  # put the old record back
                with contextlib.suppress(BridgeError):
                    self._write_marker(own_fd, marker, replace=True)
            if linked:
                _fs.remove_quietly(parent, basename)
                with contextlib.suppress(OSError):
                    _fs.fsync_dir(parent)
            raise
        finally:
            _fs.remove_quietly(parent, temp)

    # -- moving in ---------------------------------------------------------------------------

    def import_artifact(
        self, marker: Marker, data: bytes, sidecar: Mapping[str, Any] | None = None
    ) -> bool:
        """Store an artifact of another store under its own id, name, owner and time.

        Published like any artifact (temp file, marker, no-clobber name), then its sidecar
        attached and the copy read back. Resumable: an artifact already here with the same
        SHA-256 and verified bytes is left alone (``False``; a sidecar a crash left out
        is attached). A name already taken by another file is refused, never overwritten.
        """
        if hashlib.sha256(data).hexdigest() != marker.sha256:
            raise artifact_error("artifact bytes do not match their recorded SHA-256")
        if not valid_owner(marker.effective_owner) or not is_safe_relative(marker.name):
            raise artifact_error("artifact identity is invalid")
        info = inspect_image(data, self._limits)
        directory, _, basename = marker.name.rpartition("/")
        if not is_safe_filename(basename, info.format):
            raise artifact_error("artifact identity is invalid")
        with self._root_fds() as (root_fd, own_fd):
            existing = self._load_marker(own_fd, f"{marker.id}.json")
            present = existing is not None
            if existing is not None and (
                existing.sha256 != marker.sha256 or self._verified(root_fd, existing) is None
            ):
                raise artifact_error("another artifact with this id is already stored")
            if existing is None:
                dir_fd = self._publication_dir(root_fd, directory or None)
                try:
                    fresh = replace(marker, name="", sidecar_name=None, sidecar_sha256=None)
                    self._link_new_file(dir_fd, own_fd, data, basename, 1, fresh, directory or None)
                    try:
                        _fs.fsync_dir(dir_fd)
                    except OSError as exc:
                        raise _write_error("could not sync the artifact directory", exc) from exc
                finally:
                    os.close(dir_fd)
                existing = self._load_marker(own_fd, f"{marker.id}.json")
        added = False
        if sidecar is not None and (existing is None or existing.sidecar_name is None):
            self.attach_metadata(marker.id, marker.name, sidecar)
            added = True
        copied = self.read(marker.id, None)
        if copied.info.sha256 != marker.sha256:  # pragma: no cover - read verifies it
            raise artifact_error("the copied artifact does not verify")
        return not present or added

    # -- retention ---------------------------------------------------------------------------

    @staticmethod
    def _scan(own_fd: int, limit: int) -> tuple[list[str], bool]:
        """Up to ``limit`` ownership entry names, and whether more exist."""
        names: list[str] = []
        reached = False
        with os.scandir(own_fd) as entries:
            for entry in entries:
                if len(names) >= limit:
                    reached = True
                    break
                names.append(entry.name)
        return names, reached

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
        cutoff = int(current) - max_age_secs
        report = CleanupReport()
        with self._root_fds() as (root_fd, own_fd):
            sweep = sweep_stale_temps(
                root_fd, own_fd, current - stale_temp_secs, max_scan_entries, apply=True
            )
            report.stale_temp_files = sweep.stale
            report.stale_temp_files_removed = sweep.removed
            report.temp_scan_limit_reached = sweep.limit_reached
            names, report.scan_limit_reached = self._scan(own_fd, max_scan_entries)
            report.scanned = len(names)
            valid: list[Marker] = []
            for filename in names:
                marker = self._load_marker(own_fd, filename)
                if marker is None or self._verified(root_fd, marker) is None:
                    report.skipped += 1
                else:
                    valid.append(marker)
            for marker in retention_victims(valid, cutoff, max_artifacts):
                if self._remove_verified(root_fd, own_fd, marker):
                    report.deleted += 1
                else:
                    report.skipped += 1
        return report

    def _remove_verified(self, root_fd: int, own_fd: int, marker: Marker) -> bool:
        current = self._load_marker(own_fd, f"{marker.id}.json")
        if current != marker or self._verified(root_fd, marker) is None:
            return False
        try:
            if marker.sidecar_name is not None:
                with _fs.open_parent(root_fd, marker.sidecar_name) as (parent, basename):
                    os.unlink(basename, dir_fd=parent)
            with _fs.open_parent(root_fd, marker.name) as (parent, basename):
                os.unlink(basename, dir_fd=parent)
                _fs.fsync_dir(parent)
            os.unlink(f"{marker.id}.json", dir_fd=own_fd)
            _fs.fsync_dir(own_fd)
        except (Unsafe, OSError):
            return False
        return True

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
        report = RepairReport()
        with self._root_fds() as (root_fd, own_fd):
            sweep = sweep_stale_temps(
                root_fd, own_fd, current - stale_temp_secs, max_scan, apply=apply
            )
            report.stale_temp_files = sweep.stale
            report.stale_temp_files_removed = sweep.removed
            report.temp_scan_limit_reached = sweep.limit_reached
            names, report.scan_limit_reached = self._scan(own_fd, max_scan)
            report.scanned = len(names)
            for filename in names:
                marker = self._load_marker(own_fd, filename)
                if marker is None:
                    report.skipped += 1
                elif self._verified(root_fd, marker) is not None:
                    report.healthy += 1
                else:
                    # Decided alone: a live publication holds the lock (shared) from its
                    # marker to its file's name, so a missing file here is a crash's.
                    with _fs.locked(own_fd, exclusive=True):
                        self._repair_one(root_fd, own_fd, filename, report, apply)
        return report

    def _repair_one(
        self, root_fd: int, own_fd: int, filename: str, report: RepairReport, apply: bool
    ) -> None:
        marker = self._load_marker(own_fd, filename)
        if marker is None:
            report.skipped += 1
            return
        sidecar = self._sidecar_state(root_fd, marker)
        if self._read_artifact(root_fd, marker) is not None:
            if sidecar in (None, PathState.REGULAR):
                report.healthy += 1
            elif sidecar is PathState.MISSING:
                report.missing_sidecars += 1
                if apply:
                    ok = self._clear_sidecar(root_fd, own_fd, marker)
                    report.repaired += ok
                    report.skipped += not ok
            else:
                report.skipped += 1
        elif _fs.entry_state(root_fd, marker.name).state is PathState.MISSING:
            report.orphaned_records += 1
            if sidecar is PathState.INVALID:
                report.skipped += 1
            elif apply:
                ok = self._remove_orphan(root_fd, own_fd, marker)
                report.repaired += ok
                report.skipped += not ok
        else:
            report.skipped += 1

    def _clear_sidecar(self, root_fd: int, own_fd: int, marker: Marker) -> bool:
        current = self._load_marker(own_fd, f"{marker.id}.json")
        if (
            current != marker
            or self._read_artifact(root_fd, marker) is None
            or self._sidecar_state(root_fd, marker) is not PathState.MISSING
        ):
            return False
        try:
            self._write_marker(own_fd, marker.with_sidecar(None, None), replace=True)
        except BridgeError:
            return False
        return True

    def _remove_orphan(self, root_fd: int, own_fd: int, marker: Marker) -> bool:
        current = self._load_marker(own_fd, f"{marker.id}.json")
        if current != marker or _fs.entry_state(root_fd, marker.name).state is not (
            PathState.MISSING
        ):
            return False
        sidecar = self._sidecar_state(root_fd, marker)
        try:
            if sidecar is PathState.INVALID:
                return False
            if sidecar is PathState.REGULAR and marker.sidecar_name is not None:
                with _fs.open_parent(root_fd, marker.sidecar_name) as (parent, basename):
                    os.unlink(basename, dir_fd=parent)
                    _fs.fsync_dir(parent)
            os.unlink(f"{marker.id}.json", dir_fd=own_fd)
            _fs.fsync_dir(own_fd)
        except (Unsafe, OSError):
            return False
        return True
