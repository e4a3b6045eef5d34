"""Per-invocation state: the global flags, the output, and the lazily loaded config.

Configuration is resolved only when a command asks for it, so ``--help``, ``completions``,
``man`` and ``schema`` work without a config file and never import the config layer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from imagebridge.cli.output import Output

if TYPE_CHECKING:
    from imagebridge.config import BridgeConfig, LoadedConfig

__all__ = ["REMOTE_ENV", "TOKEN_ENV", "CliContext", "CliUsageError", "GlobalOptions"]

REMOTE_ENV = "IMAGEGEN_BRIDGE_URL"
TOKEN_ENV = "IMAGEGEN_BRIDGE_TOKEN"  # noqa: S105 - a variable name, not a secret


class CliUsageError(Exception):
    """A command-line mistake found after parsing (conflicting flags …): exit 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class GlobalOptions:
    config: Path | None = None
    sets: tuple[str, ...] = ()
    unsets: tuple[str, ...] = ()
    allow_inline: bool = False
    local_artifact_paths: bool = False
    remote: str | None = None
    """``--remote`` as given on the command line (not the environment)."""


@dataclass(slots=True)
class CliContext:
    options: GlobalOptions
    output: Output
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: Path = field(default_factory=Path.cwd)
    _loaded: LoadedConfig | None = None

    def load(self, *, extra_sets: tuple[str, ...] = ()) -> LoadedConfig:
        """The effective configuration (schema errors raise ``configuration``)."""
        if self._loaded is not None and not extra_sets:
            return self._loaded
        from imagebridge.config import load_config

        loaded = load_config(
            config_path=self.options.config,
            env=self.env,
            sets=(*self.options.sets, *extra_sets),
            unsets=self.options.unsets,
            cwd=self.cwd,
        )
        if not extra_sets:
            self._loaded = loaded
        return loaded

    def config(self) -> BridgeConfig:
        """The configuration, refusing one with semantic issues (``config check`` lists them).

        A public ``server.bind`` without a bearer token only matters to the commands that
        listen (``serve`` validates it fully); it does not block local generation, presets
        or sessions here, unlike the original.
        """
        return self.load().require_valid(listener=False)

    def remote_url(self) -> str | None:
        """``--remote``, else ``$IMAGEGEN_BRIDGE_URL``, else ``None`` (run in-process)."""
        if self.options.remote:
            return self.options.remote
        value = self.env.get(REMOTE_ENV, "").strip()
        return value or None

    def bearer_token(self) -> str | None:
        value = self.env.get(TOKEN_ENV, "")
        return value if value.strip() else None
