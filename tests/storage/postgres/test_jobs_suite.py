"""The SQLite job-store suite (tests/storage/sqlite/test_jobs.py), run unchanged on PostgreSQL.

Only the tests about SQLite files (symlinks, file modes, ``PRAGMA integrity_check``, v1 file
migrations, file inspection) stay SQLite-only; tests/storage/postgres/test_jobs.py covers
their PostgreSQL counterparts.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from imagebridge.storage import PostgresSharedJobStore
from tests.storage.sqlite import test_jobs as sqlite_suite
from tests.storage.sqlite.test_jobs import (  # noqa: F401 - collected here against PostgreSQL
    test_budget_admits_exactly_the_charged_size,
    test_caller_operations_never_cross_authorization_scopes,
    test_claim_only_takes_queued_uncancelled_jobs,
    test_concurrent_identical_submissions_converge_on_one_job,
    test_duplicate_job_id_is_refused_without_change,
    test_finishing_needs_a_running_job,
    test_history_filters_apply_before_cursor_pagination,
    test_history_update_requires_a_change,
    test_history_updates_only_soft_delete_terminal_jobs,
    test_idempotency_key_rules,
    test_lifecycle_survives_reopen_and_is_cursor_stable,
    test_list_rejects_bad_filters,
    test_logical_bytes_follow_the_documented_formula,
    test_logical_database_budget_rejects_before_persistence,
    test_oversized_error_is_replaced,
    test_oversized_result_keeps_the_job_running_for_a_trimmed_retry,
    test_pending_capacity_rejects_without_persisting_extra_work,
    test_progress_rules,
    test_pruning_enforces_terminal_logical_byte_budget,
    test_queued_cancellation_is_immediate_and_durable,
    test_queued_identities_page_through_every_queued_job,
    test_recovery_never_retries_ambiguous_running_work,
    test_request_text_is_stored_without_the_key,
    test_result_and_error_limits_are_configurable,
    test_running_cancel_only_flags_the_job,
    test_same_store_concurrent_keyed_creates_converge,
    test_scope_rules,
    test_search_only_ever_matches_literally,
    test_store_satisfies_the_protocol,
    test_submission_idempotency_is_atomic_scoped_and_persistent,
    test_threads_with_their_own_loops_converge_on_one_job,
    test_unknown_or_non_uuid_ids_are_not_found,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _on_postgres(postgres_at_paths: Callable[[ModuleType], None]) -> None:
    postgres_at_paths(sqlite_suite)


@pytest.fixture
def store(pg_shared_job_store: PostgresSharedJobStore) -> PostgresSharedJobStore:
    return pg_shared_job_store
