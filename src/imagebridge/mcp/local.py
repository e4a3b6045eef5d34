"""The in-process backend: the engine built from the loaded configuration.

Generations run through :meth:`ImageRuntime.execute` exactly like ``POST /v1/images``
with artifact delivery. Durable jobs and presets are read from the configured database
when it exists — the MCP server never starts a job manager of its own, so it cannot
disturb a bridge that serves the same database; it sees the jobs of the unauthenticated
local scope.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from imagebridge.application import Application, build_application, image_limits, request_limits
from imagebridge.application.artifact_backend import filesystem_store
from imagebridge.artifacts.filesystem.store import ArtifactStore, AsyncArtifactStore
from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.config import BridgeConfig
from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.jobs import ImageJob, ImageJobPage
from imagebridge.contract.presets import ImagePreset
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.provider import Provider
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.jobs import JobManager, PresetService
from imagebridge.mcp.backend import EventSink, Generation, JobFilter, SavedImage, provider_not_found
from imagebridge.mcp.settings import LOCAL_OWNER
from imagebridge.storage import (
    JobStore,
    PresetStore,
    open_job_store,
    open_preset_store,
    postgres_options,
)
from imagebridge.storage.location import resolve_store_location

__all__ = ["LocalBackend"]

_NO_JOBS = "no durable job database exists yet; start `imagegen-bridge serve` to use jobs"


def _job_not_found() -> BridgeError:
    return BridgeError(
        ErrorCode.INVALID_REQUEST,
        "durable job was not found",
        details={"resource": "job"},
        suggestions=["Call list_jobs to see the jobs of this bridge."],
    )


class LocalBackend:
    mode: Literal["in-process", "remote"] = "in-process"

    def __init__(
        self,
        application: Application,
        store: ArtifactStore,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.application = application
        self.config: BridgeConfig = application.config
        self.store = store
        self.limits = request_limits(self.config)
        self.inputs = InputLoader(
            [str(root) for root in self.config.inputs.local_roots],
            image_limits(self.config),
            max_inline_encoded_bytes=self.config.runtime.request.max_inline_encoded_bytes,
        )
        self._env = dict(os.environ if env is None else env)
        self._jobs: JobManager | None = None
        self._job_store: JobStore | None = None
        self._presets: PresetService | None = None
        self._preset_store: PresetStore | None = None
        self._lock = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        config: BridgeConfig,
        *,
        providers: Sequence[Provider] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> LocalBackend:
        store = filesystem_store(config)  # the paths it answers with name local files
        application = build_application(
            config, providers=providers, artifacts=AsyncArtifactStore(store)
        )
        try:
            return await asyncio.to_thread(cls, application, store, env=env)
        except BaseException:
            await application.aclose()
            raise

    # -- generation ---------------------------------------------------------------------------

    async def generate(self, request: ImageRequest, events: EventSink) -> Generation:
        response = await self.application.runtime.execute(
            request, ExecutionContext(owner=LOCAL_OWNER, events=events)
        )
        images: list[SavedImage] = []
        for item in response.data:
            if item.id is None or item.name is None:
                raise BridgeError(ErrorCode.INTERNAL, "the engine returned an image without a file")
            path = await asyncio.to_thread(self.store.local_path, item.id, LOCAL_OWNER)
            images.append(
                SavedImage(
                    index=item.index,
                    id=item.id,
                    name=item.name,
                    path=path,
                    format=item.format,
                    width=item.width,
                    height=item.height,
                    bytes=item.bytes,
                    sha256=item.sha256,
                )
            )
        return Generation(response, images)

    # -- catalogue ----------------------------------------------------------------------------

    async def providers(self) -> list[ProviderDescriptor]:
        registry = self.application.runtime.registry
        return sorted(registry.descriptors(), key=lambda item: item.name)

    async def capabilities(self, provider: str | None, model: str | None) -> ProviderCapabilities:
        registry = self.application.runtime.registry
        name = provider or registry.default
        if name not in registry.names:
            raise provider_not_found(name)
        return await registry.capabilities(name, model)

    # -- jobs and presets (read from the shared database) ----------------------------------

    def _database(self) -> str | os.PathLike[str]:
        return self.config.server.jobs.database

    async def _exists(self) -> bool:
        target = resolve_store_location(self._database(), ErrorCode.INTERNAL, "job database")
        if isinstance(target, Path):
            return await asyncio.to_thread(os.path.lexists, target)
        return True

    async def _job_manager(self) -> JobManager | None:
        async with self._lock:
            if self._jobs is None and await self._exists():
                store = await open_job_store(
                    self._database(),
                    postgres=postgres_options(self.config.server.jobs, self._env),
                )
                self._job_store = store
                self._jobs = JobManager(self.application.runtime, store)
            return self._jobs

    async def _preset_service(self) -> PresetService | None:
        async with self._lock:
            if self._presets is None and await self._exists():
                store = await open_preset_store(
                    self._database(),
                    postgres=postgres_options(self.config.server.jobs, self._env),
                )
                self._preset_store = store
                self._presets = PresetService(store, self.limits)
            return self._presets

    async def get_job(self, job_id: str) -> ImageJob:
        manager = await self._job_manager()
        if manager is None:
            raise _job_not_found()
        return await manager.get(LOCAL_OWNER, job_id)

    async def list_jobs(self, query: JobFilter) -> ImageJobPage:
        manager = await self._job_manager()
        if manager is None:
            return ImageJobPage(items=[])
        return await manager.list(
            LOCAL_OWNER,
            limit=query.limit,
            cursor=query.cursor,
            status=query.status,
            search=query.search,
        )

    async def preset(self, name: str) -> ImagePreset:
        service = await self._preset_service()
        if service is None:
            raise BridgeError(
                ErrorCode.INVALID_REQUEST,
                "preset was not found",
                details={"resource": "preset", "field": "name"},
                suggestions=[_NO_JOBS],
            )
        return await service.get(name)

    def artifact_url(self, artifact_id: str) -> str | None:
        del artifact_id
        return None

    async def aclose(self) -> None:
        try:
            for store in (self._job_store, self._preset_store):
                if store is not None:
                    await store.close()
        finally:
            await self.application.aclose()
