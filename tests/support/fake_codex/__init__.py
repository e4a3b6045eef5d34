"""The fake ``codex app-server`` used by the transport tests, and helpers to script it.

:data:`FAKE_CODEX` is the launcher to use as ``executable``; :func:`scenario_env`
writes a scenario file and returns the environment that points the fake at it (and at
a state folder whose ``log.jsonl`` records every message the fake received).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.fake_codex.fake_codex import FINAL_PNG, PARTIAL_PNG, make_png

__all__ = [
    "FAKE_CODEX",
    "FINAL_PNG",
    "PARTIAL_PNG",
    "make_png",
    "read_log",
    "scenario_env",
]

FAKE_CODEX = Path(__file__).resolve().with_name("fake_codex")


def scenario_env(state_dir: Path, **scenario: Any) -> dict[str, str]:
    """Write ``scenario`` to ``state_dir/scenario.json``; the env that selects it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / "scenario.json"
    path.write_text(json.dumps(scenario), encoding="utf-8")
    return {"FAKE_CODEX_SCENARIO": str(path), "FAKE_CODEX_STATE": str(state_dir)}


def read_log(state_dir: Path) -> list[dict[str, Any]]:
    """Every entry the fake logged so far (received messages and events), in order."""
    path = state_dir / "log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
