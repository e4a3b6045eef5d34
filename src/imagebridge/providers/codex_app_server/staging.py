"""Stage edit sources and reference images as files the codex child can read.

codex takes images as ``localImage`` paths, so input bytes must be on disk first. Each
turn gets its own private folder ``<root>/turn-<random>/`` under a bridge-owned root;
files in it are named by content (``<sha256 prefix>.<ext>``, so an image given twice is
written once) and the whole folder is removed after the turn. Size and count are bounded
per turn. Disk work runs in a worker thread.

Choice: the original published staged inputs into the artifact store with
random names and ownership records; here they live in a separate staging root because
they are transient inputs, not outputs — they never appear in artifact listings and are
never left behind (a sweep removes folders a crash left over).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import STORAGE_HEALTH, disk_fault, disk_fault_reason
from imagebridge.imaging.inspect import sniff_format

__all__ = ["StagedBatch", "StagingArea"]

logger = logging.getLogger(__name__)

MiB = 1024 * 1024
_PREFIX = "turn-"
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}


def _extension_of(data: bytes) -> str | None:
    image_format = sniff_format(data)
    return image_format.extension if image_format is not None else None


class StagingArea:
    """The bridge-owned root under which per-turn staging folders are made."""

    def __init__(
        self,
        root: Path,
        *,
        max_total_bytes: int = 64 * MiB,
        max_file_bytes: int = 32 * MiB,
        max_files: int = 16,
    ) -> None:
        if min(max_total_bytes, max_file_bytes, max_files) <= 0:
            raise ValueError("staging limits must be positive")
        self.root = root
        self.max_total_bytes = max_total_bytes
        self.max_file_bytes = max_file_bytes
        self.max_files = max_files

    def batch(self) -> StagedBatch:
        """A new, empty per-turn folder (created on first use); use with ``async with``."""
        return StagedBatch(self)

    async def sweep(self, *, older_than_seconds: float = 3600.0) -> int:
        """Remove turn folders left by a crash; returns how many were removed."""
        return await asyncio.to_thread(self._sweep_sync, older_than_seconds)

    def _sweep_sync(self, older_than_seconds: float) -> int:
        if not self.root.is_dir():
            return 0
        cutoff = time.time() - older_than_seconds
        removed = 0
        for entry in self.root.iterdir():
            if not entry.name.startswith(_PREFIX) or entry.is_symlink() or not entry.is_dir():
                continue
            with contextlib.suppress(OSError):
                if entry.stat().st_mtime < cutoff:
                    shutil.rmtree(entry)
                    removed += 1
        return removed


class StagedBatch:
    """The staged inputs of one turn. Paths stay valid until :meth:`cleanup`."""

    def __init__(self, area: StagingArea) -> None:
        self._area = area
        self._directory: Path | None = None
        self._by_digest: dict[str, Path] = {}
        self.paths: list[Path] = []
        """Staged files in the order they were first added."""
        self.total_bytes = 0

    @property
    def directory(self) -> Path | None:
        return self._directory

    async def add(self, data: bytes, *, media_type: str | None = None) -> Path:
        """Write one image and return its absolute path (same bytes → same path)."""
        extension = _EXTENSIONS.get(media_type or "") or _extension_of(data)
        if extension is None or _extension_of(data) is None:
            raise BridgeError(
                ErrorCode.INPUT,
                "an input image is not a PNG, JPEG or WebP file and cannot be staged",
            )
        if len(data) > self._area.max_file_bytes:
            raise BridgeError(
                ErrorCode.INPUT,
                "an input image is larger than the per-image staging limit",
                details={"image_bytes": len(data), "limit_bytes": self._area.max_file_bytes},
            )
        digest = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
        existing = self._by_digest.get(digest)
        if existing is not None:
            return existing
        if len(self.paths) >= self._area.max_files:
            raise BridgeError(
                ErrorCode.INPUT,
                "too many input images for one turn",
                details={"limit": self._area.max_files},
            )
        if self.total_bytes + len(data) > self._area.max_total_bytes:
            raise BridgeError(
                ErrorCode.INPUT,
                "the input images together exceed the staging limit",
                details={
                    "total_bytes": self.total_bytes + len(data),
                    "limit_bytes": self._area.max_total_bytes,
                },
            )
        path = await asyncio.to_thread(self._write, data, f"{digest[:32]}.{extension}")
        self._by_digest[digest] = path
        self.paths.append(path)
        self.total_bytes += len(data)
        return path

    def _write(self, data: bytes, name: str) -> Path:
        try:
            if self._directory is None:
                self._area.root.mkdir(mode=0o700, parents=True, exist_ok=True)
                made = tempfile.mkdtemp(prefix=_PREFIX, dir=self._area.root)
                self._directory = Path(made).resolve()
            target = self._directory / name
            fd, temporary = tempfile.mkstemp(prefix=".", suffix=".part", dir=self._directory)
            try:
                with os.fdopen(fd, "wb") as stream:
                    stream.write(data)
                os.replace(temporary, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as error:
            reason = disk_fault_reason(error)
            if reason is not None:  # before the turn: nothing was sent, a retry is safe
                raise disk_fault(
                    ErrorCode.ARTIFACT,
                    "cannot write an input image to the staging folder",
                    reason,
                    "staging",
                    retryable=True,
                    errno=error.errno,
                ) from None
            raise BridgeError(
                ErrorCode.ARTIFACT,
                "cannot write an input image to the staging folder",
                details={"errno": error.errno},
            ) from None
        STORAGE_HEALTH.succeeded("staging")
        return target

    async def cleanup(self) -> None:
        """Delete the folder and everything in it (idempotent, never raises)."""
        directory, self._directory = self._directory, None
        self._by_digest.clear()
        self.paths.clear()
        self.total_bytes = 0
        if directory is not None:
            await asyncio.to_thread(_remove_tree, directory)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.shield(self.cleanup())


def _remove_tree(directory: Path) -> None:
    try:
        shutil.rmtree(directory)
    except FileNotFoundError:
        pass
    except OSError as error:
        logger.warning("could not remove a staging folder (errno %s)", error.errno)
