"""Paths of the data files the tests compare against, all inside ``tests/fixtures/``.

The repository stands alone: every file a test reads lives in it (see the README of each
folder for its source). ``tests/test_self_contained.py`` fails if a test reaches outside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

FIXTURES: Final = Path(__file__).resolve().parents[1] / "fixtures"

CONTRACT_DIR: Final = FIXTURES / "contract"
ORIGINAL_CONFIG: Final = CONTRACT_DIR / "config.example.toml"
ORIGINAL_SCHEMA: Final = CONTRACT_DIR / "imagegen-bridge-v1.schema.json"
ORIGINAL_OPENAPI: Final = CONTRACT_DIR / "imagegen-bridge-v1.openapi.json"

SDK_DIR: Final = FIXTURES / "sdk"

CODEX_DIR: Final = FIXTURES / "codex"
CODEX_SUCCESS_SSE: Final = CODEX_DIR / "success.sse"
CODEX_ADVANCED_REQUEST: Final = CODEX_DIR / "advanced-request.json"
