"""Read the client configuration snippets of docs/mcp.md the way each agent reads them.

JSON (`mcpServers` for Claude Code's .mcp.json, Cursor and Claude Desktop; `servers` for
VS Code), Codex's TOML `mcp_servers` tables, and the `claude mcp add` / `codex mcp add`
command lines all become :class:`Snippet` values: the command a client would start, or the
URL it would connect to. The tests start exactly that.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
_FENCE = re.compile(r"^( *)```(\w+)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)
HTTP_START_PREFIX = "imagegen-bridge mcp --transport streamable-http"


@dataclass(frozen=True)
class Snippet:
    client: str
    transport: str  # "stdio" or "http"
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    source: str = ""

    @property
    def id(self) -> str:
        return f"{self.client}-{self.transport}-{self.source}"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Client configuration")
    return text[start : text.index("\n## ", start + 1)]


def blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(2), textwrap.dedent(m.group(3))) for m in _FENCE.finditer(text)]


def http_start_command() -> list[str]:
    """The one command the page says starts the HTTP server."""
    intro = _section().split("\n### ")[0]
    lines = [
        line.strip()
        for language, block in blocks(intro)
        if language == "sh"
        for line in block.splitlines()
        if line.strip().startswith(HTTP_START_PREFIX)
    ]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])


def _from_entry(client: str, source: str, entry: dict[str, Any], typed: bool) -> Snippet:
    if "url" in entry:
        if typed or "type" in entry:
            assert entry["type"] == "http", entry
        return Snippet(client, "http", url=entry["url"], source=source)
    if typed or "type" in entry:
        assert entry["type"] == "stdio", entry
    args = entry.get("args", [])
    assert all(isinstance(arg, str) for arg in args)
    return Snippet(
        client, "stdio", (entry["command"], *args), dict(entry.get("env", {})), source=source
    )


def _from_json(client: str, block: str, index: int) -> list[Snippet]:
    data = json.loads(block)
    key = "servers" if client == "VS Code" else "mcpServers"
    assert set(data) == {key}, f"{client} reads {key!r}"
    return [
        _from_entry(client, f"json{index}-{name}", entry, typed=client == "VS Code")
        for name, entry in data[key].items()
    ]


def _from_toml(client: str, block: str, index: int) -> list[Snippet]:
    data = tomllib.loads(block)
    assert set(data) == {"mcp_servers"}
    return [
        _from_entry(client, f"toml{index}-{name}", entry, typed=False)
        for name, entry in data["mcp_servers"].items()
    ]


def parse_command(client: str, line: str, index: int) -> Snippet | None:
    words = shlex.split(line)
    if words[:3] not in (["claude", "mcp", "add"], ["codex", "mcp", "add"]):
        assert line.startswith(HTTP_START_PREFIX), f"unknown command in {client}: {line}"
        return None
    source = f"{words[0]}-add{index}"
    if "--" in words:
        split = words.index("--")
        options, command = words[3:split], words[split + 1 :]
        env: dict[str, str] = {}
        for flag, value in itertools.pairwise(options):
            if flag in {"-e", "--env"}:
                key, _, val = value.partition("=")
                env[key] = val
        if words[0] == "claude" and env:
            assert options[0] == "imagegen-bridge", "the name comes before -e (variadic)"
        return Snippet(client, "stdio", tuple(command), env, source=source)
    if words[0] == "claude":
        assert words[3:5] == ["--transport", "http"], line
    else:
        assert words[4] == "--url", line
    return Snippet(client, "http", url=words[-1], source=source)


def sections() -> list[tuple[str, str]]:
    """``(client, text)`` for each ``###`` client section."""
    return [(part.splitlines()[0].strip(), part) for part in _section().split("\n### ")[1:]]


def snippets() -> list[Snippet]:
    found: list[Snippet] = []
    for client, part in sections():
        for index, (language, block) in enumerate(blocks(part)):
            if language == "json":
                found.extend(_from_json(client, block, index))
            elif language == "toml":
                found.extend(_from_toml(client, block, index))
            elif language == "sh":
                for line in block.splitlines():
                    snippet = parse_command(client, line, index) if line.strip() else None
                    if snippet is not None:
                        found.append(snippet)
            else:
                raise AssertionError(f"unexpected {language} block under {client}")
    return found
