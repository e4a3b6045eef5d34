"""The repository stands alone: nothing it runs names a path outside its own root, and
nothing it says cites a document it does not contain.

A clone, an unpacked sdist or a packager's build tree has no sibling folders, so a test,
benchmark or script that reads a sibling folder of the checkout (or any absolute path of the
machine it was written on) passes only where that folder happens to exist. This scan fails the
suite the moment such a path is written down again; the data files the tests need live under
``tests/fixtures/``.

Likewise a reader of a clone cannot open the original project's design documents: a comment,
docstring or page that says "see that document, section 2.3" tells them nothing. Citations
point to a page under ``docs/`` (and a section it has), to a public standard (an RFC), or
say the fact itself; the second scan below fails on a citation of anything else.
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
# The original's design documents, which sit in that sibling folder and never in a clone.
_SPEC_FOLDER = "sp" + "ec"
_SPEC_NAMES = ("api", "runtime", "providers", "cli-config", "codex-peer", "peers-and-users")
_CORRECTIONS = "ERR" + "ATA"  # the file of corrections to those documents
_SECTION = "\u00a7"  # the section sign, escaped so that this file's own text has none
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


def tracked_files(entries: tuple[str, ...] = SCANNED) -> list[str]:
    """The files git knows under ``entries`` (folders or files; tracked and not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *entries],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:  # an unpacked sdist has no .git: walk the tree instead
        return sorted(
            path.relative_to(ROOT).as_posix()
            for entry in entries
            for path in ([ROOT / entry] if (ROOT / entry).is_file() else (ROOT / entry).rglob("*"))
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
        ("scripts/check", f"cp {_WORK}{_SIBLING}/{_SPEC_FOLDER}/{_SPEC_NAMES[0]}.md ."),
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


# -- citations ---------------------------------------------------------------------------------

CITING = ("src", "tests", "bench", "docs", "scripts", "skills", "README.md")
CITING_SUFFIXES = TEXT_SUFFIXES | {".md", ".html", ".css"}
# Copied from the original unchanged: what it cites is its own business.
CITING_EXEMPT = ("tests/fixtures/",)

_SPEC_FILE = re.compile(rf"(?<![\w.-])(?:[\w.-]+/)*(?:{'|'.join(_SPEC_NAMES)})\.md\b")
_OUTSIDE_DOCUMENTS = (
    (re.compile(rf"\b{_CORRECTIONS}\b"), "cites the original's errata"),
    (re.compile(rf"(?<![\w.-]){_SPEC_FOLDER}/"), f"names the original's {_SPEC_FOLDER}/ folder"),
)
_SECTION_MARK = re.compile(rf"{_SECTION} ?(\d+)")
_CITED_PAGE = re.compile(r"([\w./-]+\.md)\)?[,:]?\s*\(?$")
_STANDARD = re.compile(r"\bRFC \d+\s*$")
_NUMBERED_HEADING = re.compile(r"^#+\s+(\d+)\.", re.MULTILINE)


def _in_repository(relative: str, cited: str) -> Path | None:
    """The repository's file that ``cited`` names from ``relative``, if there is one."""
    for base in (ROOT, (ROOT / relative).parent):
        candidate = (base / cited).resolve()
        if candidate.is_file() and candidate.is_relative_to(ROOT):
            return candidate
    return None


def _numbered_sections(page: Path | str) -> set[str]:
    text = page.read_text(encoding="utf-8") if isinstance(page, Path) else page
    return set(_NUMBERED_HEADING.findall(text))


def _section_finding(relative: str, text: str, before: str, number: str) -> str | None:
    """Why the section mark after ``before`` cites nothing the repository holds, or None."""
    if _STANDARD.search(before):
        return None
    page = _CITED_PAGE.search(before)
    if page:
        found = _in_repository(relative, page.group(1))
        if found is None:
            return f"cites a section of {page.group(1)}, which is not in the repository"
        if number not in _numbered_sections(found):
            return f"cites section {number} of {page.group(1)}, which has no such section"
        return None
    if relative.endswith(".md") and number in _numbered_sections(text):
        return None  # the page's own numbered section
    return f"cites section {number} of a document the repository does not contain"


def scan_citations(relative: str, text: str) -> list[Finding]:
    """Every line of one file's text that cites a document outside the repository."""
    findings: list[Finding] = []
    for number, line in enumerate(text.splitlines(), start=1):
        whys = [
            f"cites {match.group(0)}, which is not in the repository"
            for match in _SPEC_FILE.finditer(line)
            if _in_repository(relative, match.group(0)) is None
        ]
        whys += [why for pattern, why in _OUTSIDE_DOCUMENTS if pattern.search(line)]
        for match in _SECTION_MARK.finditer(line):
            why = _section_finding(relative, text, line[: match.start()], match.group(1))
            if why:
                whys.append(why)
        if whys:
            findings.append(Finding(relative, number, "; ".join(dict.fromkeys(whys))))
    return findings


def citing_files() -> list[str]:
    """The tracked text files whose comments, docstrings and prose are scanned for citations."""
    return [
        name
        for name in tracked_files(CITING)
        if not name.startswith(CITING_EXEMPT)
        and (ROOT / name).is_file()
        and (Path(name).suffix in CITING_SUFFIXES or Path(name).suffix == "")
    ]


def test_nothing_cites_a_document_outside_the_repository() -> None:
    findings = [
        finding
        for relative in citing_files()
        for finding in scan_citations(
            relative, (ROOT / relative).read_text(encoding="utf-8", errors="replace")
        )
    ]
    assert not findings, (
        "citations of documents the repository does not contain (point to docs/ or say the "
        "fact itself):\n" + "\n".join(map(str, findings))
    )


def test_the_citation_scan_covers_docs_and_code() -> None:
    files = citing_files()
    assert "README.md" in files and "docs/operations.md" in files
    assert "tests/test_self_contained.py" in files and "scripts/check" in files
    for folder in ("src", "tests", "bench", "docs", "scripts", "skills"):
        assert any(name.startswith(f"{folder}/") for name in files), folder
    assert not any(name.startswith(CITING_EXEMPT) for name in files)


_S = _SECTION


@pytest.mark.parametrize(
    ("relative", "line"),
    [
        ("tests/server/test_x.py", f"# ({_SPEC_NAMES[0]}.md {_S}13.7). We document what we send."),
        ("tests/engine/test_x.py", f'"""Admission gates ({_SPEC_NAMES[1]}.md {_S}1.5)."""'),
        ("src/imagebridge/x.py", f"# see {_SPEC_FOLDER}/{_SPEC_NAMES[3]}.md"),
        ("src/imagebridge/x.py", f"# carrier models: see {_SPEC_NAMES[2]}.md"),
        ("docs/x.md", f"measured by others (see `{_SPEC_NAMES[5]}.md` {_S}1.2)"),
        ("tests/jobs/test_x.py", f"    # {_CORRECTIONS} {_S}12: only include_deleted=true"),
        ("tests/storage/test_x.py", f'"""The {_S}8 sqlite_jobs statements."""'),
        ("tests/cli/test_x.py", f'"""Upstream words reach the person (issue 20 {_S}4)."""'),
        ("bench/README.md", f"| report (~10x a decode, {_SPEC_NAMES[5]} {_S}4.4) |"),
        ("src/imagebridge/x.py", f"# the chroma matte (spec {_S}6.2)"),
        ("src/imagebridge/x.py", f"# limits (docs/operations.md {_S}9)"),
        ("src/imagebridge/x.py", f"# limits (docs/nowhere.md {_S}1)"),
        ("docs/operations.md", f"## 3. Failure behaviour\n| the one safe retry, see {_S}7 |"),
    ],
)
def test_the_citation_scan_catches_each_outside_document(relative: str, line: str) -> None:
    assert scan_citations(relative, line), line


@pytest.mark.parametrize(
    ("relative", "line"),
    [
        ("src/imagebridge/server/x.py", f"redacted operator state (docs/operations.md {_S}4)."),
        ("src/imagebridge/x.py", f"# carrier models: see docs/{_SPEC_NAMES[2]}.md"),
        ("docs/operations.md", f"| sent) in [{_SPEC_NAMES[2]}.md]({_SPEC_NAMES[2]}.md). |"),
        ("docs/operations.md", f"## 3. Failure behaviour\n| the one safe retry, see {_S}3 |"),
        ("src/imagebridge/imaging/x.py", f"(RFC 9562 {_S}6.2, method 1)."),
        ("docs/api-decisions.md", "| A client written for the original works unchanged. |"),
        ("tests/server/test_x.py", "# docs/api-decisions.md, quirk 4: the bridge emits it."),
        ("tests/x.py", "spec = importlib.util.spec_from_file_location(name, path)"),
    ],
)
def test_the_citation_scan_leaves_repository_pages_alone(relative: str, line: str) -> None:
    assert scan_citations(relative, line) == []
