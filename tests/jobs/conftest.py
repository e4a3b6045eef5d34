"""A real runtime over the mock provider, a real job store, and a job manager on top.

``make_bridge`` builds single-instance bridges on SQLite; ``make_instance`` builds shared-mode
instances on one database, once on SQLite and once on the session's PostgreSQL server.
"""

from __future__ import annotations

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
from imagebridge.engine.provider import Provider
from imagebridge.jobs import JobManager, JobManagerSettings, SharedQueueSettings
from imagebridge.jobs.shared_mode import SharedQueue
from imagebridge.providers.mock import MockProvider, MockSettings
from imagebridge.storage import (
    PostgresSharedJobStore,
    SharedJobStore,
    SqliteJobStore,
    SqliteSharedJobStore,
)
from tests.support.waiting import eventually

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


async def job_where(
    manager: JobManager, job_id: str, predicate: Callable[[ImageJob], bool], scope: str = SCOPE
) -> ImageJob:
    """The job as ``manager`` reads it, once ``predicate`` holds for it."""
    latest: list[ImageJob] = []

    async def check() -> bool:
        job = await manager.get(scope, job_id)
        latest[:] = [job]
        return predicate(job)

    await eventually(check)
    return latest[0]


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
        return await job_where(self.manager, job_id, lambda job: job.status.terminal, scope)

    async def reached(self, job_id: str, predicate: Callable[[ImageJob], bool]) -> ImageJob:
        return await job_where(self.manager, job_id, predicate)


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


# -- shared mode: several instances on one database -----------------------------------------


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@dataclass
class Instance:
    """One bridge instance in shared mode: its own runtime, store handle and manager."""

    name: str
    app: Application
    store: SharedJobStore
    manager: JobManager
    clock: FakeClock

    def provider(self, name: str = "mock") -> MockProvider:
        for provider in self.app.providers:
            if isinstance(provider, MockProvider) and provider.name == name:
                return provider
        raise LookupError(name)

    @property
    def queue(self) -> SharedQueue:
        queue = self.manager.shared_queue
        assert queue is not None
        return queue

    async def settled(self, job_id: str, scope: str = SCOPE) -> ImageJob:
        """Wait for the job to reach a terminal status and return it."""
        return await job_where(self.manager, job_id, lambda job: job.status.terminal, scope)

    async def reached(self, job_id: str, predicate: Callable[[ImageJob], bool]) -> ImageJob:
        return await job_where(self.manager, job_id, predicate)


InstanceFactory = Callable[..., Awaitable[Instance]]


@pytest.fixture
async def make_instance(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[InstanceFactory]:
    """Each call starts one more instance on the test's database (SQLite file or schema)."""
    built: list[Instance] = []
    shared_clock = FakeClock()

    async def open_store(store_class: type[Any] | None) -> SharedJobStore:
        if backend == "postgres":
            url = request.getfixturevalue("postgres_url")
            schema = request.getfixturevalue("postgres_schema")
            return await (store_class or PostgresSharedJobStore).open(url, schema=schema)
        path = tmp_path / "jobs.sqlite3"
        opened: SharedJobStore = await (store_class or SqliteSharedJobStore).open(
            path, event_poll_interval_s=0.01
        )
        return opened

    async def factory(
        name: str,
        *sets: str,
        providers: tuple[str, ...] = ("mock",),
        settings: JobManagerSettings | None = None,
        lease_secs: int = 60,
        heartbeat_secs: float | None = None,
        poll_interval_s: float = 0.05,
        start: bool = True,
        clock: FakeClock | None = None,
        store_class: type[Any] | None = None,
    ) -> Instance:
        env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
        config = load_config(env=env, sets=[*MOCK_ONLY, *sets], cwd=tmp_path).config
        mocks = [MockProvider(MockSettings(name=provider)) for provider in providers]
        app = build_application(config, providers=mocks)
        store = await open_store(store_class)
        chosen = clock or shared_clock
        manager = JobManager(
            app.runtime,
            store,
            settings or JobManagerSettings(),
            clock=chosen,
            settle_timeout_s=5,
            shared=SharedQueueSettings(
                instance_id=name,
                lease_secs=lease_secs,
                # Default: half the lease in real seconds, longer than any test, so
                # heartbeats and reaping only happen when a test calls them.
                heartbeat_secs=heartbeat_secs or lease_secs / 2,
                poll_interval_s=poll_interval_s,
            ),
        )
        instance = Instance(name, app, store, manager, chosen)
        built.append(instance)
        if start:
            await manager.start()
        return instance

    yield factory
    for instance in reversed(built):
        await instance.manager.shutdown(timeout_s=0)
        await instance.app.aclose()
        await instance.store.close()
