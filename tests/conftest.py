"""Fixtures shared by the whole suite (each plugin module documents its own)."""

pytest_plugins = [
    "tests.support.codex_backend",
]
