"""Fixtures shared by the whole suite (each plugin module documents its own).

Registered here once, so every directory shares them: in particular one throwaway PostgreSQL
server per test session (``tests.support.postgres``). Do not import these fixtures into a
directory's conftest: pytest would treat the import as a second definition and start a
second server.
"""

pytest_plugins = [
    "tests.support.codex_backend",
    "tests.support.postgres",
]
