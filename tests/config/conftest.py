"""Shared fixtures: every test loads configuration in a sealed temporary world.

``world.env`` is the only environment the loader sees; it points the data directory
and the per-user config directory into ``tmp_path`` so no test reads or writes a real
home directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from imagebridge.config import LoadedConfig, load_config
from tests.support.fixture_files import ORIGINAL_CONFIG

EXAMPLE_CONFIG = ORIGINAL_CONFIG


@dataclass
class World:
    root: Path
    cwd: Path
    data_dir: Path
    xdg: Path
    env: dict[str, str] = field(default_factory=dict)

    def write(self, name: str, text: str) -> Path:
        path = self.cwd / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def load(
        self,
        *,
        config_path: Path | None = None,
        sets: Sequence[str] = (),
        unsets: Sequence[str] = (),
        **env: str,
    ) -> LoadedConfig:
        return load_config(
            config_path=config_path,
            env={**self.env, **env},
            sets=sets,
            unsets=unsets,
            cwd=self.cwd,
        )


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    cwd = tmp_path / "work"
    cwd.mkdir()
    data_dir = tmp_path / "data"
    xdg = tmp_path / "xdg"
    # Direct BridgeConfig() construction reads the process environment: seal it too.
    monkeypatch.setenv("IMAGEGEN_BRIDGE_DATA_DIR", str(data_dir))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("IMAGEGEN_BRIDGE_CONFIG", raising=False)
    return World(
        root=tmp_path,
        cwd=cwd,
        data_dir=data_dir,
        xdg=xdg,
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir), "XDG_CONFIG_HOME": str(xdg)},
    )


@pytest.fixture
def example_file(world: World) -> Path:
    """The original's full example config, copied unchanged into the working directory."""
    target = world.cwd / "example.toml"
    target.write_bytes(EXAMPLE_CONFIG.read_bytes())
    return target
