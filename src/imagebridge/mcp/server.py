"""Build and run the MCP server: stdio by default, streamable HTTP on loopback on request.

The engine runs in this process (built from the loaded configuration) unless a bridge URL
is given, in which case the tools talk to that bridge through the SDK. Nothing is ever
written to stdout except the protocol itself (stdio transport); logs go to stderr.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

from imagebridge._version import __version__
from imagebridge.config import BridgeConfig, load_config
from imagebridge.engine.provider import Provider
from imagebridge.mcp.backend import Backend
from imagebridge.mcp.options import McpOptions
from imagebridge.mcp.settings import McpSettings
from imagebridge.mcp.tools import register_tools

__all__ = [
    "INSTRUCTIONS",
    "build_server",
    "load_mcp_config",
    "open_backend",
    "run",
    "serve",
]

INSTRUCTIONS = (
    "Image generation through imagegen-bridge. generate_image and edit_image save images "
    "as files and return their absolute paths, artifact ids and small previews; pass "
    "include_image=true only when the full image bytes are needed. Input images are local "
    "file paths (inside the configured input roots) or data URLs. list_providers and "
    "get_capabilities tell which sizes, formats and counts a provider supports."
)


def build_server(backend: Backend, settings: McpSettings | None = None) -> MCPServer[Any]:
    """An MCP server exposing ``backend`` through the image tools and artifact resources."""
    server: MCPServer[Any] = MCPServer(
        "imagegen-bridge",
        title="Imagegen Bridge",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
    )
    register_tools(server, backend, settings or McpSettings())
    return server


def load_mcp_config(
    *,
    config_path: Path | None = None,
    sets: Sequence[str] = (),
    unsets: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> BridgeConfig:
    """The configuration, refusing semantic problems other than listener-only ones."""
    loaded = load_config(config_path=config_path, env=env, sets=sets, unsets=unsets)
    return loaded.require_valid(listener=False)


async def open_backend(
    config: BridgeConfig,
    options: McpOptions,
    *,
    providers: Sequence[Provider] | None = None,
    env: Mapping[str, str] | None = None,
) -> Backend:
    """In-process engine, or the SDK client of ``options.remote``."""
    if options.remote is None:
        from imagebridge.mcp.local import LocalBackend

        return await LocalBackend.open(config, providers=providers, env=env)
    from imagebridge.client import AsyncImageBridgeClient
    from imagebridge.mcp.remote import RemoteBackend

    client = AsyncImageBridgeClient(options.remote, token=options.token, env={})
    return await RemoteBackend.open(client, config)


async def serve(backend: Backend, options: McpOptions, settings: McpSettings | None = None) -> None:
    """Serve until the client disconnects (stdio) or the process is stopped (HTTP)."""
    server = build_server(backend, settings)
    try:
        if options.transport == "stdio":
            await server.run_stdio_async()
        else:
            await server.run_streamable_http_async(host=options.host, port=options.port)
    finally:
        await backend.aclose()


def run(
    config: BridgeConfig,
    options: McpOptions,
    *,
    settings: McpSettings | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Blocking entry point of ``imagegen-bridge mcp`` and ``python -m imagebridge.mcp``."""
    environ = dict(os.environ if env is None else env)

    async def main() -> None:
        backend = await open_backend(config, options, env=environ)
        await serve(backend, options, settings)

    asyncio.run(main())
