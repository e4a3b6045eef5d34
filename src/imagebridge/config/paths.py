"""Where the bridge keeps its data and looks for its configuration file.

The original defaults to ``./data/...`` relative to wherever it was started; we keep
data in the per-user data directory instead, so running the CLI from another folder
finds the same jobs, sessions and artifacts. ``IMAGEGEN_BRIDGE_DATA_DIR`` moves it
(tests point it at a temporary folder so nothing is written into a real home).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs

__all__ = [
    "APP_NAME",
    "CONFIG_ENV_VAR",
    "DATA_DIR_ENV_VAR",
    "LOCAL_CONFIG_NAME",
    "default_data_dir",
    "user_config_file",
]

APP_NAME = "imagegen-bridge"
DATA_DIR_ENV_VAR = "IMAGEGEN_BRIDGE_DATA_DIR"
CONFIG_ENV_VAR = "IMAGEGEN_BRIDGE_CONFIG"
LOCAL_CONFIG_NAME = "imagegen-bridge.toml"


def default_data_dir(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """The data directory: ``$IMAGEGEN_BRIDGE_DATA_DIR`` if set, else the user data dir.

    A relative override is taken relative to ``cwd`` (the process directory by default)
    so that every consumer sees the same absolute location.
    """
    environ = os.environ if env is None else env
    override = environ.get(DATA_DIR_ENV_VAR, "")
    if override:
        path = Path(override)
        return path if path.is_absolute() else (cwd or Path.cwd()) / path
    return platformdirs.user_data_path(APP_NAME, appauthor=False)


def user_config_file(env: Mapping[str, str] | None = None) -> Path:
    """The per-user config file: ``$XDG_CONFIG_HOME`` (only if absolute) or the OS default."""
    environ = os.environ if env is None else env
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / APP_NAME / "config.toml"
    directory = platformdirs.user_config_path(APP_NAME, appauthor=False)
    if not directory.is_absolute():
        # platformdirs reads XDG_CONFIG_HOME itself and does not insist on an absolute path.
        directory = Path.home() / ".config" / APP_NAME
    return directory / "config.toml"
