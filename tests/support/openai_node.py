"""The pinned Node ``openai`` package (``scripts/install-test-deps``), for Node-client tests.

Tests run a script under ``tests/`` with ``node`` and point the SDK at a bridge on
127.0.0.1. They skip only where ``node`` itself is missing; with node present, a missing
or different package is a failure: ``scripts/install-test-deps`` installs it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
OPENAI_NODE_DIR = REPO_ROOT / ".cache" / "openai-node"
OPENAI_NODE_VERSION = "7.60.0"
MIN_NODE_MAJOR = 20
"""openai 7.60.0 declares Node >= 22 and runs on 20 (its File and fetch globals); not on 18."""


def _node_major() -> int | None:
    try:
        out = subprocess.run(
            ["node", "-p", "process.versions.node"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return int(out.split(".")[0])
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def skip_reason() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed (the Node openai SDK tests need node and npm)"
    major = _node_major()
    if major is None or major < MIN_NODE_MAJOR:
        return f"node {major} is older than {MIN_NODE_MAJOR}, which the Node openai SDK needs"
    return None


def require_openai_node() -> Path:
    """The installed package's directory (``…/node_modules/openai``) at the pinned version."""
    package = OPENAI_NODE_DIR / "node_modules" / "openai"
    try:
        version = json.loads((package / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        version = None
    if version != OPENAI_NODE_VERSION:
        pytest.fail(
            f"the Node openai package in .cache/openai-node is {version}, the tests need "
            f"{OPENAI_NODE_VERSION} (run scripts/install-test-deps)"
        )
    return package
