"""Every client configuration snippet in docs/mcp.md starts a working MCP server.

Each stdio snippet's command and arguments are started by the official SDK's stdio client,
exactly as written (``imagegen-bridge`` is this checkout's console script, and the
example folder ``/Users/me/Pictures`` a real one); each HTTP
snippet's URL is reached on the server started by the page's own HTTP command. Both list
the tools and call ``list_providers``. Only the port is changed (to a free one).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from imagebridge.mcp import TOOL_NAMES
from mcp import Client, StdioServerParameters
from tests.cli.conftest import OFFLINE
from tests.mcp import client_snippets
from tests.mcp.test_server import free_port, stop_process, wait_for_port

SCRIPT = Path(sys.executable).with_name("imagegen-bridge")
SNIPPETS = client_snippets.snippets()
DOC_HTTP_PORT = "8788"
DOC_BRIDGE_PORT = "8787"
BRIDGE_SIDE_MODEL = "model-only-the-bridge-has"
DOC_USER_HOME = "/Users/me"  # example paths in the snippets; the test uses a real folder


@dataclass
class World:
    root: Path
    env: dict[str, str]


def _world(root: Path) -> World:
    root.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "XDG_CONFIG_HOME": str(root / "xdg-config"),
        "XDG_DATA_HOME": str(root / "xdg-data"),
        "XDG_STATE_HOME": str(root / "xdg-state"),
        "IMAGEGEN_BRIDGE_DATA_DIR": str(root / "data"),
        **OFFLINE,
    }
    return World(root, env)


def _start(
    argv: list[str], world: World, port: int, extra_env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        argv,
        cwd=world.root,
        env={**world.env, **(extra_env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
    except AssertionError:
        stop_process(process)
        raise
    return process


def _command(argv: list[str] | tuple[str, ...]) -> list[str]:
    assert argv[0] == "imagegen-bridge", "snippets start the installed console script"
    return [str(SCRIPT), *argv[1:]]


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The page's HTTP command, on a free port; yields the URL the snippets use, re-ported."""
    world = _world(tmp_path_factory.mktemp("mcp-http"))
    port = free_port()
    argv = [arg.replace(DOC_HTTP_PORT, str(port)) for arg in client_snippets.http_start_command()]
    process = _start(_command(argv), world, port)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


async def _list_and_call(client: Client) -> str:
    listed = await client.list_tools()
    assert sorted(tool.name for tool in listed.tools) == sorted(TOOL_NAMES)
    result = await client.call_tool("list_providers", {})
    assert result.is_error is False, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    assert isinstance(text, str)
    return text


def test_each_agent_the_issue_names_has_a_stdio_and_an_http_snippet() -> None:
    by_client: dict[str, set[str]] = {}
    for snippet in SNIPPETS:
        by_client.setdefault(snippet.client, set()).add(snippet.transport)
    for client in ("Claude Code", "Codex", "Cursor", "VS Code"):
        assert by_client.get(client) == {"stdio", "http"}, client


@pytest.mark.parametrize(
    "snippet", [s for s in SNIPPETS if s.transport == "stdio"], ids=lambda s: s.id
)
async def test_a_stdio_snippet_starts_the_server_and_lists_its_tools(
    snippet: client_snippets.Snippet, tmp_path: Path
) -> None:
    world = _world(tmp_path)
    env = {**world.env, **snippet.env}
    bridge: subprocess.Popen[bytes] | None = None
    if "IMAGEGEN_BRIDGE_URL" in snippet.env:
        # The snippet points at a running bridge: run one, on a free port, for it to use.
        port = free_port()
        env["IMAGEGEN_BRIDGE_URL"] = snippet.env["IMAGEGEN_BRIDGE_URL"].replace(
            DOC_BRIDGE_PORT, str(port)
        )
        assert urlsplit(env["IMAGEGEN_BRIDGE_URL"]).hostname == "127.0.0.1"
        bridge = _start(
            [str(SCRIPT), "serve", "--quiet", "--bind", f"127.0.0.1:{port}"],
            world,
            port,
            {"IMAGEGEN_BRIDGE__PROVIDERS__MOCK__MODELS": f'["{BRIDGE_SIDE_MODEL}"]'},
        )
    home = tmp_path / "user-home"
    argv = [arg.replace(DOC_USER_HOME, str(home)) for arg in _command(snippet.command)]
    if argv != _command(snippet.command):
        (home / "Pictures").mkdir(parents=True)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(tmp_path))
    try:
        async with Client(params) as client:
            providers = await _list_and_call(client)
    finally:
        if bridge is not None:
            stop_process(bridge)
    assert "mock" in providers
    # Answered by the bridge the snippet names, not by an in-process engine.
    assert (BRIDGE_SIDE_MODEL in providers) is (bridge is not None)


@pytest.mark.parametrize(
    "snippet", [s for s in SNIPPETS if s.transport == "http"], ids=lambda s: s.id
)
async def test_an_http_snippet_reaches_the_server_the_page_starts(
    snippet: client_snippets.Snippet, http_url: str
) -> None:
    parts = urlsplit(snippet.url)
    assert (parts.scheme, parts.hostname, str(parts.port), parts.path) == (
        "http",
        "127.0.0.1",
        DOC_HTTP_PORT,
        "/mcp",
    )
    async with Client(http_url) as client:
        assert "mock" in await _list_and_call(client)
