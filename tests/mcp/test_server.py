"""The MCP server as a process: stdio (the default) and streamable HTTP on loopback.

An MCP client from the official SDK spawns ``python -m imagebridge.mcp`` with a temporary
data directory and the mock provider, exactly as Claude Desktop or Codex would.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_types import ImageContent, ResourceLink

from imagebridge.mcp import TOOL_NAMES
from mcp import Client, StdioServerParameters
from tests.mcp.conftest import MOCK_ONLY, Progress, decode
from tests.support.waiting import STARTUP_S


def server_args(inputs: Path) -> list[str]:
    sets = [*MOCK_ONLY, f'inputs.local_roots=["{inputs}"]']
    return ["-m", "imagebridge.mcp", *[arg for item in sets for arg in ("--set", item)]]


def server_env(data_dir: Path) -> dict[str, str]:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir), "PATH": os.environ.get("PATH", "")}
    for name in ("HOME", "PYTHONPATH", "VIRTUAL_ENV"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    data_dir, inputs = tmp_path / "data", tmp_path / "inputs"
    inputs.mkdir()
    return data_dir, inputs


async def test_stdio_session_end_to_end(dirs: tuple[Path, Path]) -> None:
    data_dir, inputs = dirs
    params = StdioServerParameters(
        command=sys.executable,
        args=server_args(inputs),
        env=server_env(data_dir),
        cwd=str(data_dir.parent),
    )
    progress = Progress()
    async with Client(params) as client:
        listed = await client.list_tools()
        assert sorted(tool.name for tool in listed.tools) == sorted(TOOL_NAMES)

        result = await client.call_tool(
            "generate_image",
            {"prompt": "[mock:latency=300] a paper fox", "n": 2, "size": "64x48"},
            progress_callback=progress,
        )
        assert result.is_error is False
        records = result.structured_content["images"]
        assert len(records) == 2
        for record in records:
            path = Path(record["path"])
            assert path.is_file()
            assert path.is_relative_to(data_dir)
            assert decode(path.read_bytes()).size == (64, 48)
        assert len({record["id"] for record in records}) == 2
        assert len([c for c in result.content if isinstance(c, ImageContent)]) == 2
        assert progress.messages[0] == "started"
        assert progress.messages[-1] == "completed"
        assert len(progress.events) >= 3

        link = next(c for c in result.content if isinstance(c, ResourceLink))
        read = await client.read_resource(link.uri)
        assert read.contents[0].mime_type == "image/png"

        invalid = await client.call_tool("generate_image", {"prompt": "fox", "size": "0x1024"})
        assert invalid.is_error is True
        assert "parameters.size" in invalid.content[0].text
        assert "Suggestions:" in invalid.content[0].text

        again = await client.call_tool("list_providers", {})  # the server is still up
        assert again.is_error is False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError("the MCP server exited during startup")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the MCP server did not start listening")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture
def http_server(dirs: tuple[Path, Path]) -> Iterator[str]:
    data_dir, inputs = dirs
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            *server_args(inputs),
            "--transport",
            "streamable-http",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        env=server_env(data_dir),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


async def test_streamable_http_on_loopback(http_server: str) -> None:
    async with Client(http_server) as client:
        listed = await client.list_tools()
        assert "generate_image" in {tool.name for tool in listed.tools}
        result = await client.call_tool("generate_image", {"prompt": "fox", "size": "32x32"})
        assert result.is_error is False
        assert Path(result.structured_content["images"][0]["path"]).is_file()


SCRIPT = Path(sys.executable).with_name("imagegen-bridge")


async def test_the_cli_entry_serves_stdio(dirs: tuple[Path, Path]) -> None:
    data_dir, inputs = dirs
    sets = [*MOCK_ONLY, f'inputs.local_roots=["{inputs}"]']
    params = StdioServerParameters(
        command=str(SCRIPT),
        args=["mcp", *[arg for item in sets for arg in ("--set", item)]],
        env=server_env(data_dir),
        cwd=str(data_dir.parent),
    )
    async with Client(params) as client:
        result = await client.call_tool("generate_image", {"prompt": "fox", "size": "16x16"})
        assert result.is_error is False
        assert Path(result.structured_content["images"][0]["path"]).is_relative_to(data_dir)
