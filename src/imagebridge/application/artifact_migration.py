"""Moving artifacts between the filesystem store and the S3 one, and checking a store.

``imagegen-bridge artifacts migrate --to s3|filesystem`` and ``artifacts verify`` run
these. A
migration copies every artifact the filesystem store vouches for (its marker is valid and
its bytes match the recorded SHA-256) into the bucket under the same id, name, owner and
creation time, with its sidecar, reads the copy back and verifies it. It is resumable: an
artifact already in the bucket with the same hash is counted and skipped, so an
interrupted run is simply run again. The filesystem copy is never changed or removed.
Back (``--to filesystem``) is the same in the other direction: every artifact the bucket
vouches for is published into ``artifacts.root`` under its own id, name, owner and time
(never over an existing file), its sidecar attached, read back and verified; the bucket
is left as it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from imagebridge.artifacts.filesystem.store import ArtifactStore
from imagebridge.artifacts.s3.store import S3ArtifactStore
from imagebridge.contract.errors import BridgeError

__all__ = [
    "MigrationReport",
    "VerifyReport",
    "migrate_to_filesystem",
    "migrate_to_s3",
    "verify_filesystem",
]

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class MigrationReport:
    """``scanned`` markers; ``copied`` now, ``already_present`` from an earlier run,
    ``skipped`` (not verifiable in the source: never copied) and ``failed`` ids."""

    scanned: int = 0
    copied: int = 0
    already_present: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)
    scan_limit_reached: bool = False


@dataclass(slots=True)
class VerifyReport:
    scanned: int = 0
    verified: int = 0
    failed: list[str] = field(default_factory=list)
    scan_limit_reached: bool = False


async def migrate_to_s3(
    source: ArtifactStore,
    target: S3ArtifactStore,
    *,
    max_scan: int,
    apply: bool,
    progress: Progress | None = None,
) -> MigrationReport:
    """Copy (``apply``) or count what would be copied, one artifact at a time."""
    markers, reached = await asyncio.to_thread(source.markers, max_scan)
    report = MigrationReport(scanned=len(markers), scan_limit_reached=reached)
    for done, marker in enumerate(markers, start=1):
        if marker is None:
            report.skipped += 1
            continue
        try:
            content = await asyncio.to_thread(source.read, marker.id, None)
            sidecar = (
                await asyncio.to_thread(source.read_sidecar, marker.id, None)
                if content.sidecar_name is not None
                else None
            )
        except BridgeError:
            report.skipped += 1  # the filesystem does not vouch for it: never copied
            continue
        if not apply:
            report.copied += 1
        else:
            try:
                copied = await target.import_artifact(marker, content.data, sidecar)
            except BridgeError as error:
                if error.retryable:
                    raise  # the store is away: stop; a rerun resumes here
                report.failed.append(marker.id)
                continue
            if copied:
                report.copied += 1
            else:
                report.already_present += 1
        if progress is not None:
            progress(done, len(markers))
    return report


async def migrate_to_filesystem(
    source: S3ArtifactStore,
    target: ArtifactStore,
    *,
    max_scan: int,
    apply: bool,
    progress: Progress | None = None,
) -> MigrationReport:
    """Copy (``apply``) or count what would be copied from the bucket, one at a time."""
    markers, reached = await source.markers(max_scan)
    report = MigrationReport(scanned=len(markers), scan_limit_reached=reached)
    for done, marker in enumerate(markers, start=1):
        if marker is None:
            report.skipped += 1
            continue
        try:
            content = await source.read(marker.id, None)
            sidecar = (
                await source.read_sidecar(marker.id, None)
                if content.sidecar_name is not None
                else None
            )
        except BridgeError as error:
            if error.retryable:
                raise  # the store is away: stop; a rerun resumes here
            report.skipped += 1  # the bucket does not vouch for it: never copied
            continue
        if not apply:
            report.copied += 1
        else:
            try:
                copied = await asyncio.to_thread(
                    target.import_artifact, marker, content.data, sidecar
                )
            except BridgeError as error:
                if error.details.get("reason"):
                    raise  # a storage fault (no space, I/O error): stop; a rerun resumes
                report.failed.append(marker.id)
                continue
            if copied:
                report.copied += 1
            else:
                report.already_present += 1
        if progress is not None:
            progress(done, len(markers))
    return report


async def verify_filesystem(store: ArtifactStore, *, max_scan: int) -> VerifyReport:
    """Read back every filesystem artifact against its recorded hashes."""
    markers, reached = await asyncio.to_thread(store.markers, max_scan)
    report = VerifyReport(scanned=len(markers), scan_limit_reached=reached)
    for marker in markers:
        if marker is None:
            report.failed.append("(invalid marker)")
            continue
        try:
            await asyncio.to_thread(store.read, marker.id, None)
        except BridgeError as error:
            if error.details.get("reason"):
                raise  # a storage fault (no space, I/O error), not a failed check
            report.failed.append(marker.id)
            continue
        report.verified += 1
    return report
