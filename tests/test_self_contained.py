"""The repository stands alone: nothing it runs names a path outside its own root.

A clone, an unpacked sdist or a packager's build tree has no sibling folders, so a test,
benchmark or script that reads a sibling folder of the checkout (or any absolute path of the
machine it was written on) passes only where that folder happens to exist. This scan fails the
suite the moment such a path is written down again; the data files the tests need live under
``tests/fixtures/``.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("src", "tests", "bench", "scripts", ".ci")
# Copied data is compared against, never executed; this file spells the patterns it hunts.
EXEMPT = ("tests/fixtures/", "tests/test_self_contained.py")
TEXT_SUFFIXES = {".py", ".sh", ".toml", ".js", ".mjs", ".cjs", ".json", ".cfg", ".ini", ".txt"}

_PARENTS = re.compile(r"\.parents\[(\d+)\]((?:\.parent\b)*)")
_ROOT_PARENT = re.compile(r"\b\w*ROOT\w*(?:\(\))?\.parent\b")
# The names are assembled so that this file itself never spells a path outside the checkout.
_SIBLING = "shared"  # the folder of material that sits beside the checkout on the dev machine
_WORK = "/work/"  # the dev machines' absolute work folder
_NAMED_OUTSIDE = (
    (re.compile(rf"\.\./{_SIBLING}\b"), f"names ../{_SIBLING}"),
    (re.compile(rf"""["']{_SIBLING}["']\s*/|/\s*["']{_SIBLING}["']"""), "builds a path through it"),
    (re.compile(rf"""["']\.\.["']\s*,\s*["']{_SIBLING}["']"""), f"joins '..' and '{_SIBLING}'"),
    (re.compile(rf"(?<![\w.$-]){_WORK}"), f"names an absolute {_WORK} path"),
)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}"


def scan_text(relative: str, text: str) -> list[Finding]:
    """Every place in one file's text that reaches outside the repository root."""
    root_index = len(PurePosixPath(relative).parts) - 1  # parents[root_index] is the root
    findings: list[Finding] = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _PARENTS.finditer(line):
            index = int(match.group(1)) + match.group(2).count(".parent")
            if index > root_index:
                why = f"{match.group(0)} leaves the root (parents[{root_index}])"
                findings.append(Finding(relative, number, why))
        if _ROOT_PARENT.search(line):
            findings.append(Finding(relative, number, "takes the parent of the repository root"))
        for pattern, why in _NAMED_OUTSIDE:
            if pattern.search(line):
                findings.append(Finding(relative, number, why))
    return findings


def tracked_files() -> list[str]:
    """The files git knows under the scanned folders (tracked and not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *SCANNED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:  # an unpacked sdist has no .git: walk the tree instead
        return sorted(
            path.relative_to(ROOT).as_posix()
            for folder in SCANNED
            if (ROOT / folder).is_dir()
            for path in (ROOT / folder).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        )
    return sorted(line for line in listed.stdout.splitlines() if line)


def _scanned(relative: str) -> bool:
    if relative.startswith(EXEMPT):
        return False
    path = ROOT / relative
    return path.suffix in TEXT_SUFFIXES or (path.is_file() and path.suffix == "")


def test_nothing_names_a_path_outside_the_repository() -> None:
    findings = [
        finding
        for relative in tracked_files()
        if _scanned(relative) and (ROOT / relative).is_file()
        for finding in scan_text(
            relative, (ROOT / relative).read_text(encoding="utf-8", errors="replace")
        )
    ]
    assert not findings, "paths outside the repository:\n" + "\n".join(map(str, findings))


def test_the_scan_covers_the_trees_ci_runs() -> None:
    files = tracked_files()
    for folder in SCANNED:
        assert any(name.startswith(f"{folder}/") for name in files), folder
    assert "scripts/check" in files and "scripts/loopback-only" in files


@pytest.mark.parametrize(
    ("relative", "line"),
    [
        ("tests/contract/test_x.py", 'FIX = Path(__file__).resolve().parents[3] / "sdk"'),
        ("tests/x.py", "ROOT = Path(__file__).resolve().parents[1].parent"),
        ("tests/support/real.py", 'TOOL = REPO_ROOT.parent / "tools" / "x"'),
        ("tests/a.py", f'open("../{_SIBLING}/contract/config.example.toml")'),
        ("bench/a.py", f'here / "{_SIBLING}" / "fixtures"'),
        ("scripts/a.py", f'os.path.join(root, "..", "{_SIBLING}")'),
        ("scripts/check", f"cp {_WORK}{_SIBLING}/spec/api.md ."),
    ],
)
def test_the_scan_catches_each_way_out(relative: str, line: str) -> None:
    assert scan_text(relative, line), line


@pytest.mark.parametrize(
    ("relative", "line"),
    [
        ("tests/contract/test_x.py", 'FIX = Path(__file__).resolve().parents[2] / "tests"'),
        ("tests/support/real.py", 'TOOL = REPO_ROOT / "scripts" / "loopback-only"'),
        ("tests/a.py", f"f'server.jobs.database=\"{{tmp_path}}/{_SIBLING}/jobs.sqlite3\"'"),
        ("tests/a.py", 'assert not is_safe_directory("a/../b")'),
        ("src/imagebridge/x.py", 'if ".." in parts:'),
    ],
)
def test_the_scan_leaves_paths_inside_the_repository_alone(relative: str, line: str) -> None:
    assert scan_text(relative, line) == []
