"""Helpers shared by the app-server tests: the fake-codex factory and the reaping check."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from imagebridge.providers.codex_app_server import AppServerClient, AppServerOptions
from imagebridge.providers.codex_app_server.process import ChildProcess
from tests.support.fake_codex import FAKE_CODEX, read_log, scenario_env


def assert_reaped(pids: list[int]) -> None:
    """Every pid is gone — not running and not a zombie (``kill(pid, 0)`` must fail)."""
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def is_running_fake(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"fake_codex.py" in command


class FakeCodexFactory:
    """Builds clients (or bare options) for the fake codex; reaps everything at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.clients: list[AppServerClient] = []
        self.state_dir = tmp_path / "fake-state"
        self.codex_home = tmp_path / "codex-home"
        self.codex_home.mkdir()

    def options(self, scenario: dict[str, Any] | None = None, **overrides: Any) -> AppServerOptions:
        env = scenario_env(self.state_dir, **(scenario or {}))
        settings: dict[str, Any] = {
            "executable": str(FAKE_CODEX),
            "cwd": self.tmp_path,
            "codex_home": self.codex_home,
            "env": env,
            "rpc_timeout_ms": 10_000,
            "restart_backoff_ms": 50,
            "shutdown_timeout_ms": 3_000,
        }
        settings.update(overrides)
        return AppServerOptions(**settings)

    def client(
        self,
        scenario: dict[str, Any] | None = None,
        *,
        wait_started: bool = False,
        **overrides: Any,
    ) -> AppServerClient:
        """A client of the fake; ``wait_started`` hands it each child only once the child runs
        its main loop, so a short ``rpc_timeout_ms`` times the call under test and not the
        interpreter's start (which a busy machine stretches past any such bound)."""
        spawn = self._spawn_started if wait_started else None
        client = AppServerClient(self.options(scenario, **overrides), spawn=spawn)
        self.clients.append(client)
        return client

    async def _spawn_started(self, options: AppServerOptions, generation: int) -> ChildProcess:
        child = await ChildProcess.spawn(options, generation=generation)
        started = {"event": "started", "pid": child.pid}
        while True:  # bounded by the test's timeout
            if any(started.items() <= entry.items() for entry in read_log(self.state_dir)):
                return child
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        for client in self.clients:
            await client.shutdown()
        # Whatever a test did, no fake may outlive it: kill leftovers, then fail.
        leftovers = sorted(
            pid for pid in {e["pid"] for e in read_log(self.state_dir)} if is_running_fake(pid)
        )
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
        assert not leftovers, f"fake codex processes outlived the test: {leftovers}"
        for client in self.clients:
            assert_reaped(client.spawned_pids)
