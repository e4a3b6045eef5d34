"""Fixtures for the app-server tests: fake-codex clients and bridges that never leak a process."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

# tests.support (the fake codex, the real-codex harness) lives in the repository's test
# tree: make the repository root importable however pytest was started.
_ROOT = Path(__file__).resolve().parents[3]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from tests.support.real_codex import CODEX_VERSIONS  # noqa: E402

from .bridge import BridgeHarness  # noqa: E402
from .support import FakeCodexFactory  # noqa: E402

SCHEMAS = Path(__file__).with_name("schemas")
"""Schemas from ``codex app-server generate-json-schema`` (codex 0.169.0) that the tests
check message shapes against."""


@pytest.fixture(params=CODEX_VERSIONS, ids=[f"codex-{v}" for v in CODEX_VERSIONS])
def codex_version(request: pytest.FixtureRequest) -> str:
    """Each real codex release the tier runs against (tests.support.real_codex)."""
    version: str = request.param
    return version


@pytest.fixture
async def fake_codex(tmp_path: Path) -> AsyncIterator[FakeCodexFactory]:
    factory = FakeCodexFactory(tmp_path)
    try:
        yield factory
    finally:
        await factory.close()


@pytest.fixture
async def bridge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[BridgeHarness]:
    """Applications whose codex-app-server runs the fake codex; no process may leak."""
    harness = BridgeHarness(tmp_path, monkeypatch)
    try:
        yield harness
    finally:
        await harness.close()


@pytest.fixture
def schema() -> Callable[[str], dict[str, Any]]:
    """Load one of the codex 0.169 JSON Schemas kept next to these tests."""

    def load(name: str) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
        return loaded

    return load
