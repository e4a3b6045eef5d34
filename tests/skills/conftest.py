"""A sealed world in which the skill's commands run as an agent runs them: through ``bash``,
with ``imagegen-bridge`` on ``PATH``, the mock provider as default and every directory the
bridge reads or writes (config, data, artifacts, HOME, XDG) inside the test's tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import OFFLINE, Result

BIN_DIR = Path(sys.executable).parent


@dataclass
class Sandbox:
    cwd: Path
    data: Path
    env: dict[str, str]

    @property
    def artifacts(self) -> Path:
        return self.data / "artifacts"

    def run(self, command: str, timeout: float = 120) -> Result:
        """``bash -c COMMAND`` in the working directory, as an agent's shell tool does."""
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        return Result(
            done.returncode,
            done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"),
        )


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    cwd = tmp_path / "project"
    cwd.mkdir()
    data = tmp_path / "data"
    home = tmp_path / "home"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("IMAGEGEN_BRIDGE", "XDG_", "OPENAI_", "CODEX_"))
    }
    env.update(
        {
            "PATH": f"{BIN_DIR}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "CODEX_HOME": str(home / ".codex"),
            "IMAGEGEN_BRIDGE_DATA_DIR": str(data),
            **OFFLINE,
        }
    )
    return Sandbox(cwd, data, env)
