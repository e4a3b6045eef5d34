"""Fixtures for the app-server transport tests: fake-codex clients that never leak a process."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

# The support package lives in the repository's test tree; make it importable however
# pytest was started (tests/providers has no __init__.py of its own).
_ROOT = Path(__file__).resolve().parents[3]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from imagebridge.providers.codex_app_server import AppServerClient, AppServerOptions  # noqa: E402
from tests.support.fake_codex import FAKE_CODEX, read_log, scenario_env  # noqa: E402

SCHEMAS = Path(__file__).with_name("schemas")
"""Schemas from ``codex app-server generate-json-schema`` (codex 0.169.0) that the tests
check message shapes against."""


def assert_reaped(pids: list[int]) -> None:
    """Every pid is gone — not running and not a zombie (``kill(pid, 0)`` must fail)."""
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _is_running_fake(pid: int) -> bool:
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

    def client(self, scenario: dict[str, Any] | None = None, **overrides: Any) -> AppServerClient:
        client = AppServerClient(self.options(scenario, **overrides))
        self.clients.append(client)
        return client

    async def close(self) -> None:
        for client in self.clients:
            await client.shutdown()
        # Whatever a test did, no fake may outlive it: kill leftovers, then fail.
        leftovers = sorted(
            pid for pid in {e["pid"] for e in read_log(self.state_dir)} if _is_running_fake(pid)
        )
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
        assert not leftovers, f"fake codex processes outlived the test: {leftovers}"
        for client in self.clients:
            assert_reaped(client.spawned_pids)


@pytest.fixture
async def fake_codex(tmp_path: Path) -> AsyncIterator[FakeCodexFactory]:
    factory = FakeCodexFactory(tmp_path)
    try:
        yield factory
    finally:
        await factory.close()


@pytest.fixture
def schema() -> Callable[[str], dict[str, Any]]:
    """Load one of the codex 0.169 JSON Schemas kept next to these tests."""

    def load(name: str) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
        return loaded

    return load
