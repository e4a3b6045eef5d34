"""The SQLite preset-store suite (tests/storage/sqlite/test_presets.py), run unchanged on
PostgreSQL.

Sharing one database with the job store is covered for PostgreSQL in
tests/storage/postgres/test_presets.py (the SQLite version inspects the file).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from tests.storage.sqlite import test_presets as sqlite_suite
from tests.storage.sqlite.test_presets import (  # noqa: F401 - collected here against PostgreSQL
    test_description_rules,
    test_each_owner_has_its_own_presets_and_reads_the_shared_ones_under_them,
    test_invalid_names_are_refused_on_every_operation,
    test_list_pages_by_name_after_an_exclusive_cursor,
    test_missing_presets_are_not_found,
    test_name_edges_are_accepted,
    test_preset_crud_is_durable_and_conflict_safe,
    test_store_satisfies_the_protocol,
    test_template_rules,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _on_postgres(postgres_at_paths: Callable[[ModuleType], None]) -> None:
    postgres_at_paths(sqlite_suite)
