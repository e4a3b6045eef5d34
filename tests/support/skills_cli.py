"""Run the pinned npm ``skills`` CLI (``scripts/install-test-deps``) offline.

The CLI is what ``npx skills add <repo>`` runs; the listing test uses it on this
repository's checkout as a local path, so it never clones anything. Every run preloads
``offline_node.cjs``, which refuses and logs any attempt to reach the network (the CLI's
telemetry included; ``DO_NOT_TRACK`` turns that off anyway), and the test asserts the log
stayed empty.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SKILLS_CACHE = REPO_ROOT / ".cache" / "skills-cli"
SKILLS_VERSION = "1.5.17"
OFFLINE_PRELOAD = Path(__file__).with_name("offline_node.cjs")


def skip_reason() -> str | None:
    """Why the skills-CLI tests skip here: only when ``node`` is absent.

    With node present, a missing or wrong CLI is a failure (:func:`require_skills_cli`):
    ``scripts/install-test-deps`` installs it.
    """
    if shutil.which("node") is None:
        return "node is not installed (the skills CLI tier needs node and npm)"
    return None


def installed_version() -> str | None:
    manifest = SKILLS_CACHE / "node_modules" / "skills" / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def require_skills_cli() -> Path:
    """The pinned ``skills`` executable; fails the test (never skips it) when it is missing."""
    binary = SKILLS_CACHE / "node_modules" / ".bin" / "skills"
    if not binary.exists():
        pytest.fail(
            "node is installed but the skills CLI is not in .cache/skills-cli "
            f"(run scripts/install-test-deps to install skills@{SKILLS_VERSION})"
        )
    version = installed_version()
    if version != SKILLS_VERSION:
        pytest.fail(
            f"the skills CLI in .cache/skills-cli is {version}, the tests are written for "
            f"{SKILLS_VERSION} (remove .cache/skills-cli and run scripts/install-test-deps)"
        )
    return binary


@dataclass
class NodeRun:
    code: int
    output: str
    network_attempts: list[str]


def run_offline(argv: list[str], *, cwd: Path, home: Path, timeout: float = 60) -> NodeRun:
    """Run a node program with the network refused; report what it tried to reach."""
    home.mkdir(parents=True, exist_ok=True)
    log = home / "network-attempts.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "NODE_OPTIONS": f"--require {OFFLINE_PRELOAD}",
        "IMAGEBRIDGE_NETWORK_LOG": str(log),
        "DO_NOT_TRACK": "1",
        "DISABLE_TELEMETRY": "1",
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
        "CI": "1",
    }
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    attempts = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    output = (done.stdout + done.stderr).decode("utf-8", "replace")
    return NodeRun(done.returncode, output, attempts)
