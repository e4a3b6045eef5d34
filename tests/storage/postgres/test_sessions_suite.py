"""The SQLite session-store suite (tests/storage/sqlite/test_sessions.py), run unchanged on
PostgreSQL.

File inspection and file-system failures stay SQLite-only; tests/storage/postgres/test_sessions.py
covers the PostgreSQL counterparts (schema inspection, unreachable server → ``session`` errors).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from tests.storage.sqlite import test_sessions as sqlite_suite
from tests.storage.sqlite.test_sessions import (  # noqa: F401 - collected here against PostgreSQL
    path,
    test_binding_survives_database_reopen,
    test_providers_have_independent_namespaces,
    test_rejects_empty_or_control_character_identifiers,
    test_store_satisfies_the_protocol,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _on_postgres(postgres_at_paths: Callable[[ModuleType], None]) -> None:
    postgres_at_paths(sqlite_suite)
