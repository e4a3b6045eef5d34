"""A real runtime over the mock provider, a real SQLite job store, and a job manager on top."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from imagebridge.application import Application, build_application
from imagebridge.config import load_config
from imagebridge.contract.jobs import ImageJob
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.jobs import JobManager, JobManagerSettings
from imagebridge.providers.base import Provider
from imagebridge.providers.mock import MockProvider
from imagebridge.storage import SqliteJobStore

SCOPE = "bearer:" + "a" * 64
OTHER_SCOPE = "anonymous-local"
MOCK_ONLY = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
]


def image_request(prompt: str = "a red fox", **parameters: Any) -> ImageRequest:
    """A small generate request (explicit size keeps the mock fast)."""
    return ImageRequest.model_validate(
        {
            "operation": "generate",
            "prompt": prompt,
            "parameters": {"size": "16x16", **parameters},
        }
    )


class FakeClock:
    """Whole Unix seconds the test moves by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, interval: float = 0.01
) -> None:
    """Poll ``predicate`` until it holds; fail the test after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        if loop.time() >= deadline:
            pytest.fail("condition not reached in time")
        await asyncio.sleep(interval)


@dataclass
class Bridge:
    """One running bridge: application, job store and manager over a shared data dir."""

    data_dir: Path
    app: Application
    store: SqliteJobStore
    manager: JobManager
    clock: FakeClock
    extra: list[Any] = field(default_factory=list)

    @property
    def mock(self) -> MockProvider:
        provider = self.app.providers[0]
        if isinstance(provider, FanoutProvider):
            inner = provider.inner
            assert isinstance(inner, MockProvider)
            return inner
        assert isinstance(provider, MockProvider)
        return provider

    async def settled(self, job_id: str, scope: str = SCOPE) -> ImageJob:
        """Wait for the job to reach a terminal status and return it."""
        latest: list[ImageJob] = []

        async def terminal() -> bool:
            job = await self.manager.get(scope, job_id)
            latest[:] = [job]
            return job.status.terminal

        await wait_until(terminal)
        return latest[0]

    async def reached(self, job_id: str, predicate: Callable[[ImageJob], bool]) -> ImageJob:
        latest: list[ImageJob] = []

        async def check() -> bool:
            job = await self.manager.get(SCOPE, job_id)
            latest[:] = [job]
            return predicate(job)

        await wait_until(check)
        return latest[0]


BridgeFactory = Callable[..., Awaitable[Bridge]]


@pytest.fixture
async def make_bridge(tmp_path: Path) -> AsyncIterator[BridgeFactory]:
    """Build bridges on ``tmp_path``; every one is shut down and closed after the test."""
    built: list[Bridge] = []

    async def factory(
        *sets: str,
        settings: JobManagerSettings | None = None,
        store: SqliteJobStore | None = None,
        start: bool = True,
        clock: FakeClock | None = None,
        store_class: type[SqliteJobStore] = SqliteJobStore,
        providers: list[Provider] | None = None,
        queued_page: int = 500,
        **store_options: Any,
    ) -> Bridge:
        env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
        config = load_config(env=env, sets=[*MOCK_ONLY, *sets], cwd=tmp_path).config
        app = build_application(config, providers=providers)
        opened = store or await store_class.open(tmp_path / "jobs.sqlite3", **store_options)
        clock = clock or FakeClock()
        manager = JobManager(
            app.runtime,
            opened,
            settings or JobManagerSettings(),
            clock=clock,
            settle_timeout_s=5,
            queued_page=queued_page,
        )
        bridge = Bridge(tmp_path, app, opened, manager, clock)
        built.append(bridge)
        if start:
            await manager.start()
        return bridge

    yield factory
    for bridge in reversed(built):
        await bridge.manager.shutdown(timeout_s=0)
        await bridge.app.aclose()
        await bridge.store.close()
