"""A real bridge for the SDK's tests, and helpers that run one test body on both clients.

``bridge`` is a uvicorn server on 127.0.0.1 with the mock provider (module scoped, so a
module pays for one start). ``api`` is parametrized: the same test runs once with
:class:`ImageBridgeClient` and once with :class:`AsyncImageBridgeClient`; test bodies
``await resolve(...)`` every call, which is a no-op for the blocking client.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

import httpx
import pytest

from imagebridge.client import AsyncImageBridgeClient, ImageBridgeClient, RetryPolicy
from tests.server.conftest import LiveServer, start_server

T = TypeVar("T")

BRIDGE_SETS = (
    "runtime.circuit_breaker.enabled=false",
    "server.jobs.max_running=2",
)
FAST_RETRY = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.002)

Client = ImageBridgeClient | AsyncImageBridgeClient


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("bridge"), BRIDGE_SETS)
    yield live
    live.stop()


async def resolve(value: T | Any) -> Any:
    """The value of a call on either client (awaited when the async client returned one)."""
    if inspect.isawaitable(value):
        return await value
    return value


async def collect(iterable: Any) -> list[Any]:
    """Every item of a sync or async iterator."""
    if hasattr(iterable, "__aiter__"):
        return [item async for item in iterable]
    return list(iterable)


async def close(client: Client) -> None:
    if isinstance(client, AsyncImageBridgeClient):
        await client.aclose()
    else:
        client.close()


def make_client(kind: str, url: str, **kwargs: Any) -> Client:
    kwargs.setdefault("env", {})
    if "max_retries" not in kwargs:
        kwargs.setdefault("retry", FAST_RETRY)
    if kind == "async":
        return AsyncImageBridgeClient(url, **kwargs)
    return ImageBridgeClient(url, **kwargs)


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def api(kind: str, bridge: LiveServer) -> AsyncIterator[Client]:
    client = make_client(kind, bridge.url)
    yield client
    await close(client)


class Recorder:
    """Records every request an httpx client sends (method, path, headers)."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def sync_hook(self, request: httpx.Request) -> None:
        self.requests.append(request)

    async def async_hook(self, request: httpx.Request) -> None:
        self.requests.append(request)

    def paths(self, method: str | None = None) -> list[str]:
        return [r.url.path for r in self.requests if method is None or r.method == method]

    def http_client(self, kind: str) -> httpx.Client | httpx.AsyncClient:
        if kind == "async":
            return httpx.AsyncClient(event_hooks={"request": [self.async_hook]})
        return httpx.Client(event_hooks={"request": [self.sync_hook]})


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def recorded(kind: str, bridge: LiveServer, recorder: Recorder) -> AsyncIterator[Client]:
    """A client over an httpx client that records what was sent."""
    http = recorder.http_client(kind)
    client = make_client(kind, bridge.url, http_client=http)
    yield client
    await close(client)
    if isinstance(http, httpx.AsyncClient):
        await http.aclose()
    else:
        http.close()
