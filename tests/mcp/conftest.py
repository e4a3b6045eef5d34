"""MCP test fixtures: a mock-only configuration in a temporary data directory, and an
in-memory MCP client session on a server built over the in-process engine."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from imagebridge.config import BridgeConfig
from imagebridge.mcp import McpOptions, McpSettings, build_server, load_mcp_config, open_backend
from imagebridge.mcp.backend import Backend
from mcp import Client

MOCK_ONLY = (
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
    "runtime.circuit_breaker.enabled=false",
)


def decode(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


@dataclass
class Workspace:
    """A data directory, an input root inside it, and the configuration using both."""

    data_dir: Path
    inputs: Path
    env: dict[str, str]
    config: BridgeConfig


def workspace_for(tmp_path: Path, *sets: str) -> Workspace:
    data_dir = tmp_path / "data"
    inputs = tmp_path / "inputs"
    inputs.mkdir(parents=True)
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir)}
    config = load_mcp_config(env=env, sets=[*MOCK_ONLY, f'inputs.local_roots=["{inputs}"]', *sets])
    return Workspace(data_dir, inputs, env, config)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return workspace_for(tmp_path)


@dataclass
class Progress:
    """Progress notifications as the MCP client received them."""

    events: list[tuple[float, float | None, str | None]] = field(default_factory=list)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.events.append((progress, total, message))

    @property
    def messages(self) -> list[str | None]:
        return [message for _, _, message in self.events]


@dataclass
class Session:
    client: Client
    backend: Backend

    async def call(self, tool: str, arguments: dict[str, Any], progress: Progress | None = None
                   ) -> Any:  # fmt: skip
        return await self.client.call_tool(tool, arguments, progress_callback=progress)


@asynccontextmanager
async def connected(
    workspace: Workspace, options: McpOptions | None = None, settings: McpSettings | None = None
) -> AsyncIterator[Session]:
    """An in-memory MCP session on a server over ``workspace`` (entered inside the test:
    anyio scopes must be entered and left by the same task)."""
    backend = await open_backend(workspace.config, options or McpOptions(), env=workspace.env)
    try:
        async with Client(build_server(backend, settings)) as client:
            yield Session(client, backend)
    finally:
        await backend.aclose()
