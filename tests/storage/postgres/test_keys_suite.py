"""The SQLite key-store suite (tests/storage/sqlite/test_keys.py), run unchanged on PostgreSQL:
the concurrent-reservation test there opens two stores (two connection pools) on one schema.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from tests.storage.sqlite import test_keys as sqlite_suite
from tests.storage.sqlite.test_keys import (  # noqa: F401 - collected here against PostgreSQL
    path,
    test_concurrency_slots_are_counted_in_the_database,
    test_concurrent_reservations_on_two_connections_are_exact,
    test_duplicate_name_and_bad_limits_are_refused,
    test_expired_slot_leases_are_reclaimed_once,
    test_release_gives_back_only_to_its_own_period,
    test_reservation_stops_at_every_window_and_resets_with_the_period,
    test_revoked_or_expired_keys_reserve_nothing,
    test_store_satisfies_the_protocol_and_keeps_hashes_only,
    test_update_rotate_and_audit,
    test_usage_adds_up_per_day_provider_and_account,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _on_postgres(postgres_at_paths: Callable[[ModuleType], None]) -> None:
    postgres_at_paths(sqlite_suite)
