"""The pinned Vercel AI SDK (``scripts/install-test-deps`` puts it in ``.cache/ai-sdk``).

The test runs a Node script with it against a bridge on 127.0.0.1. It skips only where
``node`` itself is missing; with node present, a missing or different package is a
failure: ``scripts/install-test-deps`` installs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.openai_node import REPO_ROOT

AI_SDK_DIR = REPO_ROOT / ".cache" / "ai-sdk"
AI_SDK_VERSIONS = {"ai": "7.0.173", "@ai-sdk/openai": "4.0.118"}


def require_ai_sdk() -> Path:
    """The install prefix, with both packages at their pinned versions."""
    for name, pinned in AI_SDK_VERSIONS.items():
        manifest = AI_SDK_DIR / "node_modules" / name / "package.json"
        try:
            version = json.loads(manifest.read_text(encoding="utf-8"))["version"]
        except (OSError, ValueError, KeyError):
            version = None
        if version != pinned:
            pytest.fail(
                f"{name} in .cache/ai-sdk is {version}, the tests need {pinned} "
                "(run scripts/install-test-deps)"
            )
    return AI_SDK_DIR
