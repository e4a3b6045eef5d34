"""The plain records every artifact backend returns: the same values from a directory or a bucket.

What is stored (:class:`StoredArtifact`), what a read delivers (:class:`ArtifactContent`)
and what cleanup and repair report (:class:`CleanupReport`, :class:`RepairReport`). The
protocol these travel through is :class:`~imagebridge.artifacts.interfaces.ArtifactBackend`.
"""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.imaging.inspect import ImageInfo

__all__ = ["ArtifactContent", "CleanupReport", "RepairReport", "StoredArtifact"]


@dataclass(frozen=True, slots=True)
class StoredArtifact:
    """A newly stored artifact: its id, portable name and verified image facts."""

    id: str
    name: str
    info: ImageInfo


@dataclass(frozen=True, slots=True)
class ArtifactContent:
    """Verified bytes of an owned artifact, for delivery."""

    id: str
    name: str
    data: bytes
    info: ImageInfo
    sidecar_name: str | None

    @property
    def basename(self) -> str:
        return self.name.rsplit("/", 1)[-1]


@dataclass(slots=True)
class CleanupReport:
    """``scanned``/``deleted``/``skipped`` count ownership markers; ``stale_temp_*`` count
    crash leftovers found (and removed) by the sweep (temp files on a filesystem; objects no
    marker names and stale multipart uploads in a bucket)."""

    scanned: int = 0
    deleted: int = 0
    skipped: int = 0
    scan_limit_reached: bool = False
    stale_temp_files: int = 0
    stale_temp_files_removed: int = 0
    temp_scan_limit_reached: bool = False


@dataclass(slots=True)
class RepairReport:
    """Marker counts as in :class:`CleanupReport`; an audit only counts crash leftovers."""

    scanned: int = 0
    healthy: int = 0
    orphaned_records: int = 0
    missing_sidecars: int = 0
    repaired: int = 0
    skipped: int = 0
    scan_limit_reached: bool = False
    stale_temp_files: int = 0
    stale_temp_files_removed: int = 0
    temp_scan_limit_reached: bool = False
