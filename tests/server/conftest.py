"""Real uvicorn servers on 127.0.0.1 for black-box tests.

``serve(*sets, providers=..., env=..., options=...)`` starts the app built from the mock-only
configuration plus ``sets`` (where ``{data}`` names the server's data directory) in a
background thread, on a random loopback port, and stops
it (gracefully, bounded) when the test ends. ``server.state`` is the app's
:class:`BridgeState` — the test hook through which a test can look at provider doubles.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from imagebridge.application import build_application
from imagebridge.config import BridgeConfig, load_config
from imagebridge.engine.provider import Provider
from imagebridge.server import ServerOptions, create_app
from imagebridge.server.serve import uvicorn_config
from imagebridge.server.state import BridgeState
from tests.support.waiting import STARTUP_S, wait_until

MOCK_ONLY = (
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
)


@dataclass
class LiveServer:
    url: str
    port: int
    state: BridgeState
    server: uvicorn.Server
    thread: threading.Thread
    data_dir: Path

    def client(self, **kwargs: Any) -> httpx.Client:
        kwargs.setdefault("timeout", 30.0)
        return httpx.Client(base_url=self.url, **kwargs)

    def async_client(self, **kwargs: Any) -> httpx.AsyncClient:
        kwargs.setdefault("timeout", 30.0)
        return httpx.AsyncClient(base_url=self.url, **kwargs)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        assert not self.thread.is_alive(), "server did not stop"


ServeFactory = Callable[..., LiveServer]
ProviderSpec = Sequence[Provider] | Callable[[BridgeConfig], Sequence[Provider]]
"""Providers to register instead of the configured set, or a function building them."""


def start_server(
    data_dir: Path,
    sets: Sequence[str] = (),
    *,
    providers: ProviderSpec | None = None,
    env: Mapping[str, str] | None = None,
    options: ServerOptions | None = None,
    shipped_defaults: bool = False,
) -> LiveServer:
    """A served app on a free port; ``shipped_defaults`` keeps the default provider set."""
    data_dir.mkdir(parents=True, exist_ok=True)
    environ = {"IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir), **(env or {})}
    expanded = [item.replace("{data}", str(data_dir)) for item in sets]
    base = () if shipped_defaults else MOCK_ONLY
    loaded = load_config(env=environ, sets=[*base, *expanded], cwd=data_dir)
    config = loaded.config
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    options = dataclasses.replace(
        options or ServerOptions(), listener=("127.0.0.1", port), env=environ
    )
    built = providers(config) if callable(providers) else providers
    application = build_application(config, providers=built) if built else None
    app = create_app(config, application=application, origins=loaded.origins, options=options)
    server = uvicorn.Server(uvicorn_config(app, config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    if not wait_until(lambda: server.started or not thread.is_alive(), STARTUP_S):
        raise RuntimeError("server did not start")
    if not server.started:
        raise RuntimeError("server failed to start")
    return LiveServer(
        url=f"http://127.0.0.1:{port}",
        port=port,
        state=app.state.bridge,
        server=server,
        thread=thread,
        data_dir=data_dir,
    )


@contextlib.contextmanager
def servers(root: Path) -> Iterator[ServeFactory]:
    """A factory of servers under ``root``, all stopped when the context ends."""
    started: list[LiveServer] = []

    def factory(
        *sets: str,
        providers: ProviderSpec | None = None,
        env: Mapping[str, str] | None = None,
        options: ServerOptions | None = None,
    ) -> LiveServer:
        live = start_server(
            root / f"server-{len(started)}", sets, providers=providers, env=env, options=options
        )
        started.append(live)
        return live

    try:
        yield factory
    finally:
        for live in started:
            live.stop()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServeFactory]:
    with servers(tmp_path) as factory:
        yield factory


@pytest.fixture(scope="module")
def serve_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeFactory]:
    """Like ``serve``, but the servers live for the whole test module."""
    with servers(tmp_path_factory.mktemp("servers")) as factory:
        yield factory
