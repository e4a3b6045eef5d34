"""Fixtures for running the store tests on PostgreSQL (the server itself is registered for the
whole suite in ``tests/conftest.py``; the both-backend ``shared_backend`` / ``open_shared``
fixtures are in ``tests/storage/conftest.py``).

* ``pg_job_store`` / ``pg_preset_store``: open stores on the session's test server, each test
  in its own schema.
* ``postgres_at_paths``: makes the existing SQLite test modules run on PostgreSQL unchanged.
  Their tests open stores by path (``SqliteJobStore.open(db_path)``); within one test this
  fixture swaps those names for openers that map each path to its own schema, so a reopened
  path is the same database, as with SQLite. Nothing is duplicated: the PostgreSQL suites
  import the very same test functions.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest

from imagebridge.storage import (
    PostgresJobStore,
    PostgresKeyStore,
    PostgresPresetStore,
    PostgresSessionStore,
)


@pytest.fixture
async def pg_job_store(postgres_url: str, postgres_schema: str) -> AsyncIterator[PostgresJobStore]:
    store = await PostgresJobStore.open(postgres_url, schema=postgres_schema)
    try:
        yield store
    finally:
        await store.close()


@dataclass
class _OpenAtPath:
    """Stands in for a SQLite store class: ``open(path, **options)`` opens PostgreSQL."""

    store_class: Any
    url: str
    prefix: str

    def schema_for(self, path: str | os.PathLike[str]) -> str:
        # Deterministic, so threads reopening one path agree without a lock.
        digest = hashlib.sha256(os.fspath(path).encode()).hexdigest()[:16]
        return f"{self.prefix}_{digest}"

    async def open(self, path: str | os.PathLike[str], **options: Any) -> Any:
        return await self.store_class.open(self.url, schema=self.schema_for(path), **options)


@pytest.fixture
def postgres_at_paths(
    monkeypatch: pytest.MonkeyPatch, postgres_url: str, postgres_schema: str
) -> Callable[[ModuleType], None]:
    """``patch(module)`` makes that test module's SQLite store names open PostgreSQL."""
    openers = {
        "SqliteJobStore": _OpenAtPath(PostgresJobStore, postgres_url, postgres_schema),
        "SqlitePresetStore": _OpenAtPath(PostgresPresetStore, postgres_url, postgres_schema),
        "SqliteSessionStore": _OpenAtPath(PostgresSessionStore, postgres_url, postgres_schema),
        "SqliteKeyStore": _OpenAtPath(PostgresKeyStore, postgres_url, postgres_schema),
    }

    def patch(module: ModuleType) -> None:
        for name, opener in openers.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, opener)

    return patch
