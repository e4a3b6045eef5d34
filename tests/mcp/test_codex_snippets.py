"""The real codex CLI (the pinned one from ``scripts/install-test-deps``) reads the Codex
snippets of docs/mcp.md as the servers the page says they are.

The TOML tables are written to a throw-away ``CODEX_HOME/config.toml`` and listed with
``codex mcp list --json``; the ``codex mcp add`` lines are run as written and read back
with ``codex mcp get --json``. Proxies point at a dead loopback port, so nothing leaves
the machine.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.mcp import client_snippets
from tests.support.real_codex import CODEX_VERSIONS, require_codex_binary, skip_reason

pytestmark = [
    pytest.mark.codex,
    pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or ""),
]

DEAD_PROXY = "http://127.0.0.1:9"


def _codex(home: Path, *args: str) -> Any:
    binary = require_codex_binary(CODEX_VERSIONS[-1])  # the current release reads the snippets
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "CODEX_HOME": str(home / "codex"),
        "HTTPS_PROXY": DEAD_PROXY,
        "HTTP_PROXY": DEAD_PROXY,
        "ALL_PROXY": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    done = subprocess.run(
        [str(binary), *args], env=env, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    return json.loads(done.stdout) if "--json" in args else None


def _expected_transport(snippet: client_snippets.Snippet) -> dict[str, Any]:
    if snippet.transport == "http":
        return {"type": "streamable_http", "url": snippet.url}
    return {"type": "stdio", "command": snippet.command[0], "args": list(snippet.command[1:])}


def _codex_blocks(language: str) -> list[tuple[int, str]]:
    """``(index in the Codex section, text)`` of its blocks in one language."""
    part = next(text for client, text in client_snippets.sections() if client == "Codex")
    return [(i, b) for i, (lang, b) in enumerate(client_snippets.blocks(part)) if lang == language]


def _matches(transport: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(transport.get(key) == value for key, value in expected.items())


@pytest.mark.parametrize(("index", "block"), _codex_blocks("toml"))
def test_codex_reads_each_toml_snippet_as_the_server_the_page_means(
    tmp_path: Path, index: int, block: str
) -> None:
    (tmp_path / "codex").mkdir()
    (tmp_path / "codex" / "config.toml").write_text(block, encoding="utf-8")
    listed = _codex(tmp_path, "mcp", "list", "--json")
    expected = [
        s
        for s in client_snippets.snippets()
        if s.client == "Codex" and s.source.startswith(f"toml{index}-")
    ]
    assert len(listed) == len(expected) == 1
    entry = listed[0]
    assert entry["name"] == "imagegen-bridge" and entry["enabled"] is True
    assert _matches(entry["transport"], _expected_transport(expected[0]))
    assert entry["tool_timeout_sec"] == 600


def test_codex_mcp_add_lines_register_the_servers_the_page_means(tmp_path: Path) -> None:
    lines = [
        line.strip()
        for _, block in _codex_blocks("sh")
        for line in block.splitlines()
        if line.startswith("codex mcp add")
    ]
    assert len(lines) == 2
    for line in lines:
        home = tmp_path / str(lines.index(line))
        (home / "codex").mkdir(parents=True)
        _codex(home, *shlex.split(line)[1:])
        entry = _codex(home, "mcp", "get", "imagegen-bridge", "--json")
        snippet = client_snippets.parse_command("Codex", line, 0)
        assert snippet is not None
        assert _matches(entry["transport"], _expected_transport(snippet))
