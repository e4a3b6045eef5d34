"""The artifact store for async code: the same operations, awaitable, run in a worker thread.

:class:`~imagebridge.artifacts.store.ArtifactStore` is synchronous (every operation is a
sequence of blocking filesystem calls); async layers hold an :class:`AsyncArtifactStore` and
``await store.publish(...)`` so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
from imagebridge.artifacts.store import ArtifactStore

__all__ = ["AsyncArtifactStore"]


class AsyncArtifactStore:
    """The same store with awaitable methods of the same names (work runs in a thread)."""

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
