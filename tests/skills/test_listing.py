"""The npm ``skills`` CLI (what ``npx skills add <repo>`` runs) finds the shipped skill.

It runs ``skills add . --list`` on this checkout: the local-path form, which reads the
directory and clones nothing. Node runs with the network refused and logged
(``tests/support/offline_node.cjs``), and the test asserts nothing tried to leave the
machine, so the check is offline by proof, not by hope.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.skills import skill_doc
from tests.support import skills_cli

pytestmark = pytest.mark.skipif(
    skills_cli.skip_reason() is not None, reason=skills_cli.skip_reason() or ""
)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _words(text: str) -> str:
    return " ".join(ANSI.sub("", text).replace("│", " ").split())


def test_skills_add_list_finds_the_skill_offline(tmp_path: Path) -> None:
    binary = skills_cli.require_skills_cli()
    home = tmp_path / "home"
    run = skills_cli.run_offline(
        [str(binary), "add", ".", "--list"], cwd=skill_doc.REPO_ROOT, home=home
    )
    assert run.code == 0, run.output
    assert run.network_attempts == []
    listing = _words(run.output)
    assert "Found 1 skill" in listing
    skill = skill_doc.load()
    assert skill.front_matter["name"] in listing
    assert _words(skill.front_matter["description"]) in listing
    # Listing installs nothing: no agent directory appeared in HOME or the checkout.
    assert list(home.iterdir()) == []
    assert not (skill_doc.REPO_ROOT / ".agents").exists()


def test_the_offline_guard_records_and_refuses_network_use(tmp_path: Path) -> None:
    """The guard the listing test relies on really catches fetch, sockets and git."""
    skills_cli.require_skills_cli()
    script = (
        "fetch('https://example.com/x').catch(() => {});"
        "try { require('node:net').connect(443, 'example.org'); } catch {}"
        "try { require('node:child_process').execFileSync('git', ['ls-remote', 'x']); } catch {}"
        "require('node:net').createServer().listen(0, '127.0.0.1', function () {"
        "  const port = this.address().port;"
        "  require('node:net').connect(port, '127.0.0.1', () => process.exit(0));"
        "});"
    )
    run = skills_cli.run_offline(["node", "-e", script], cwd=tmp_path, home=tmp_path / "home")
    assert run.code == 0, run.output
    assert run.network_attempts == [
        "fetch https://example.com/x",
        "connect example.org",
        "spawn git",
    ]
