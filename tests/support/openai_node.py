"""The pinned Node ``openai`` package (``scripts/install-test-deps``), for Node-client tests.

Tests run a script under ``tests/`` with ``node`` and point the SDK at a bridge on
127.0.0.1. They skip only where ``node`` itself is missing; with node present, a missing
or different package is a failure: ``scripts/install-test-deps`` installs it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
OPENAI_NODE_DIR = REPO_ROOT / ".cache" / "openai-node"
OPENAI_NODE_VERSION = "7.60.0"


def skip_reason() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed (the Node openai SDK tests need node and npm)"
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
