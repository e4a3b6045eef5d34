"""Plain-data views of the configuration for ``config show``, ``config origins`` and diagnostics.

The model only ever holds the *names* of secret-bearing variables (``*_env``), and
nothing here reads the environment, so rendering can never reveal a secret.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import tomli_w

from imagebridge.config.loader import ConfigOrigin
from imagebridge.config.model import BridgeConfig

__all__ = ["origins", "show", "to_toml"]


def show(config: BridgeConfig) -> dict[str, Any]:
    """The full effective configuration as JSON-able data (unset optional keys are ``None``)."""
    return config.model_dump(mode="json")


def origins(entries: Iterable[ConfigOrigin]) -> list[dict[str, str]]:
    """``[{field, source, key}]`` as ``config origins`` and ``/v1/diagnostics`` show it."""
    return [entry.to_dict() for entry in entries]


def to_toml(data: Mapping[str, Any]) -> str:
    """A TOML document for ``data``; ``None`` values are left out (TOML has no null).

    The output of :func:`show` written this way loads back to the same configuration.
    """
    return tomli_w.dumps(_without_none(data))


def _without_none(data: Mapping[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in data.items():
        if value is None:
            continue
        result[key] = _without_none(value) if isinstance(value, Mapping) else value
    return result
