"""A real ``imagegen-bridge serve`` subprocess on 127.0.0.1 for the original-SDK tier.

The server is this environment's own console script, started with a mock-only
configuration (plus one unreachable OpenAI-compatible instance, so provider pages have a
second page) and a bearer token, on a port the kernel picks (``--bind 127.0.0.1:0``). The
fixture reads the announced URL, and stops the process (SIGTERM, then SIGKILL) at the end.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.waiting import STARTUP_S

TOKEN = "sdk-tier-token"
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")

CONFIG = """\
default_provider = "mock"

[server]
bearer_token_env = "SDK_TIER_TOKEN"

[providers.codex_responses]
enabled = false

[providers.codex_app_server]
enabled = false

# Registered but never reachable (port 9, loopback): a second provider for pagination.
[providers.openai_compatible.local-sd]
base_url = "http://127.0.0.1:9/v1"
models = ["sdxl"]
"""


@dataclass(frozen=True)
class BridgeProcess:
    url: str
    token: str
    root: Path


def _console_script() -> str:
    """``imagegen-bridge`` next to this interpreter (the venv that runs the tests)."""
    beside = Path(sys.executable).with_name("imagegen-bridge")
    if beside.exists():
        return str(beside)
    found = shutil.which("imagegen-bridge")
    assert found, "the imagegen-bridge console script is not installed"
    return found


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeProcess]:
    root = tmp_path_factory.mktemp("sdk-tier")
    config = root / "bridge.toml"
    config.write_text(CONFIG, encoding="utf-8")
    log = root / "server.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "IMAGEGEN_BRIDGE_DATA_DIR": str(root / "data"),
        "SDK_TIER_TOKEN": TOKEN,
    }
    command = [_console_script(), "--config", str(config), "serve", "--bind", "127.0.0.1:0"]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        url = _wait_for_url(process, log)
        yield BridgeProcess(url=url, token=TOKEN, root=root)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_for_url(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        found = _LISTENING.search(log.read_text(encoding="utf-8", errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"imagegen-bridge serve did not start:\n{log.read_text()[-4000:]}")
