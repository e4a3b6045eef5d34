"""An MCP server for imagebridge: image tools for Claude, Cursor, VS Code, Codex and others.

Run ``imagegen-bridge mcp`` (or ``python -m imagebridge.mcp``): stdio by default, the
engine in-process, or ``--remote URL`` to use a running bridge. Tools:
``generate_image``, ``edit_image``, ``apply_preset``, ``list_providers``,
``get_capabilities``, ``get_job``, ``list_jobs``. See ``docs/mcp.md``.

The MCP SDK is imported on first use of a name that needs it, so checking options (and a
command's ``--help``) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from imagebridge.mcp.options import McpOptions, options_from, parse_bind
from imagebridge.mcp.settings import McpSettings

if TYPE_CHECKING:
    from imagebridge.mcp.server import build_server, load_mcp_config, open_backend, run, serve
    from imagebridge.mcp.tools import TOOL_NAMES

__all__ = [
    "TOOL_NAMES",
    "McpOptions",
    "McpSettings",
    "build_server",
    "load_mcp_config",
    "open_backend",
    "options_from",
    "parse_bind",
    "run",
    "serve",
]

_LAZY = {
    "TOOL_NAMES": "imagebridge.mcp.tools",
    "build_server": "imagebridge.mcp.server",
    "load_mcp_config": "imagebridge.mcp.server",
    "open_backend": "imagebridge.mcp.server",
    "run": "imagebridge.mcp.server",
    "serve": "imagebridge.mcp.server",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
