"""A whole bridge (``build_application``) whose ``codex-app-server`` runs the fake codex.

:class:`BridgeHarness` writes the fake's scenario, points ``CODEX_HOME`` and the fake's
state at the test's tmp dir, builds applications on one data dir (so a second one is a
bridge restart on the same session database) and, at teardown, closes them and fails the
test if any fake codex process outlived it.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from imagebridge.application import Application, build_application
from imagebridge.config import load_config
from imagebridge.config.model import BridgeConfig
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.providers.codex_app_server import CodexAppServerProvider
from tests.support.fake_codex import FAKE_CODEX, read_log, scenario_env

from .support import assert_reaped, is_running_fake

PROVIDER = "codex-app-server"


def image_request(prompt: str = "a small blue square", **fields: Any) -> ImageRequest:
    body: dict[str, Any] = {"operation": "generate", "prompt": prompt}
    body.update(fields)
    return ImageRequest.model_validate(body)


def decoded(b64: str | None) -> bytes:
    assert b64 is not None
    return base64.b64decode(b64)


class BridgeHarness:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path = tmp_path
        self.monkeypatch = monkeypatch
        self.state_dir = tmp_path / "fake-state"
        self.codex_home = tmp_path / "codex-home"
        self.data_dir = tmp_path / "data"
        self.workdir = tmp_path / "work"
        for folder in (self.codex_home, self.data_dir, self.workdir):
            folder.mkdir(parents=True, exist_ok=True)
        self.apps: list[Application] = []
        self.scenario()

    # -- the fake ----------------------------------------------------------------------

    def scenario(self, **scenario: Any) -> None:
        """(Re)write the fake's scenario; children started from now on follow it."""
        for key, value in scenario_env(self.state_dir, **scenario).items():
            self.monkeypatch.setenv(key, value)
        self.monkeypatch.setenv("CODEX_HOME", str(self.codex_home))

    def log(self) -> list[dict[str, Any]]:
        return read_log(self.state_dir)

    def received(self, method: str) -> list[dict[str, Any]]:
        return [
            entry["received"]
            for entry in self.log()
            if entry.get("received", {}).get("method") == method
        ]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [entry for entry in self.log() if entry.get("event") == name]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Poll the fake's log (bounded) until ``predicate`` holds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            if loop.time() > deadline:
                raise AssertionError("the fake codex never reached the expected state")
            await asyncio.sleep(0.02)

    # -- the bridge --------------------------------------------------------------------

    def config(self, *sets: str) -> BridgeConfig:
        base = [
            f'default_provider="{PROVIDER}"',
            "providers.codex_responses.enabled=false",
            "providers.mock.enabled=false",
            f'providers.codex_app_server.executable="{FAKE_CODEX}"',
            f'providers.codex_app_server.cwd="{self.workdir}"',
            "providers.codex_app_server.rpc_timeout_ms=10000",
            "providers.codex_app_server.restart_backoff_ms=50",
            "providers.codex_app_server.shutdown_timeout_ms=3000",
        ]
        loaded = load_config(
            env={"IMAGEGEN_BRIDGE_DATA_DIR": str(self.data_dir)},
            sets=[*base, *sets],
            cwd=self.tmp_path,
        )
        return loaded.require_valid()

    def app(self, *sets: str) -> Application:
        app = build_application(self.config(*sets))
        self.apps.append(app)
        return app

    @staticmethod
    def provider(app: Application) -> CodexAppServerProvider:
        wrapped = app.runtime.registry.resolve(PROVIDER)
        inner = wrapped.inner if isinstance(wrapped, FanoutProvider) else wrapped
        assert isinstance(inner, CodexAppServerProvider)
        return inner

    async def settle(self, app: Application) -> None:
        """Wait for the provider's background clean-ups (interrupts, archives, staging)."""
        await self.provider(app).settle(timeout=10)

    def fake_pids(self) -> set[int]:
        return {entry["pid"] for entry in self.log()}

    async def close(self) -> None:
        for app in self.apps:
            await app.aclose()
        leftovers = sorted(pid for pid in self.fake_pids() if is_running_fake(pid))
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
        assert not leftovers, f"fake codex processes outlived the test: {leftovers}"
        for app in self.apps:
            for client in self.provider(app).clients:
                assert_reaped(client.spawned_pids)
