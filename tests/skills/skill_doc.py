"""Read the shipped agent skill the way an agent does: front matter, commands, tables.

The tests take everything they run or check from ``SKILL.md`` itself, so the skill cannot
say one thing while the tests check another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SKILL_DIR = REPO_ROOT / "skills" / "generate-images-with-bridge"
SKILL_FILE = SKILL_DIR / "SKILL.md"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_PLACEHOLDER = re.compile(r'"<([a-z-]+)>"')


@dataclass(frozen=True)
class Skill:
    front_matter: dict[str, str]
    body: str

    def blocks(self, language: str) -> list[str]:
        """The fenced blocks of one info string, in document order."""
        return [m.group(2) for m in _FENCE.finditer(self.body) if m.group(1) == language]

    def commands(self) -> list[str]:
        """Every command the skill tells the agent to run (its ``sh`` blocks), in order."""
        found: list[str] = []
        for block in self.blocks("sh"):
            joined = block.replace("\\\n", " ")
            found.extend(line.strip() for line in joined.splitlines() if line.strip())
        return found

    def prose(self) -> str:
        """The body without its fenced blocks."""
        return _FENCE.sub("", self.body)

    def section(self, heading_start: str) -> str:
        """The text of the ``##`` section whose heading starts with ``heading_start``."""
        parts = re.split(r"^## ", self.body, flags=re.MULTILINE)
        for part in parts[1:]:
            if part.startswith(heading_start):
                return part
        raise AssertionError(f"SKILL.md has no section starting with {heading_start!r}")

    def table_rows(self, heading_start: str) -> list[list[str]]:
        """The body rows of the first Markdown table in a section, as stripped cells."""
        rows: list[list[str]] = []
        for line in self.section(heading_start).splitlines():
            if not line.startswith("|"):
                if rows:
                    break
                continue
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if set("".join(cells)) <= {"-", " "}:
                continue
            rows.append(cells)
        return rows[1:]  # without the header


def placeholders(command: str) -> list[str]:
    """The ``"<name>"`` placeholders of one command."""
    return _PLACEHOLDER.findall(command)


def fill(command: str, values: dict[str, str]) -> str:
    """Replace each ``"<name>"`` placeholder with a quoted value (no shell metacharacters)."""

    def replace(match: re.Match[str]) -> str:
        value = values[match.group(1)]
        assert not set(value) & set('"$`\\'), value
        return f'"{value}"'

    return _PLACEHOLDER.sub(replace, command)


def load() -> Skill:
    text = SKILL_FILE.read_text(encoding="utf-8")
    assert text.startswith("---\n"), "SKILL.md must open with YAML front matter"
    header, _, body = text[4:].partition("\n---\n")
    front: dict[str, str] = {}
    for line in header.splitlines():
        key, sep, value = line.partition(":")
        assert sep and re.fullmatch(r"[a-z][a-z0-9_-]*", key), f"unexpected front matter: {line}"
        front[key] = value.strip()
    return Skill(front, body)


def backticked(text: str) -> list[str]:
    """Every inline code span of a text."""
    return re.findall(r"`([^`\n]+)`", text)
