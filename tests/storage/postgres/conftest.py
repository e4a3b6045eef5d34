"""Fixtures for running the store tests on PostgreSQL (the server itself is registered for the
whole suite in ``tests/conftest.py``; the both-backend ``shared_backend`` / ``open_shared``
fixtures are in ``tests/storage/conftest.py``).

* ``pg_shared_job_store``: an open shared job store on the session's test server, each test in
  its own schema.
* ``sql`` / ``schema_exists`` / ``submit``: set-up and inspection on their own connection, and
  one submitted job; ``closed_port`` and ``limited_role`` (a login with no privileges).
* ``postgres_at_paths``: makes the existing SQLite test modules run on PostgreSQL unchanged.
  Their tests open stores by path (``SqliteJobStore.open(db_path)``); within one test this
  fixture swaps those names for openers that map each path to its own schema, so a reopened
  path is the same database, as with SQLite. Nothing is duplicated: the PostgreSQL suites
  import the very same test functions.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import psycopg
import pytest

from imagebridge.storage import (
    PostgresKeyStore,
    PostgresPresetStore,
    PostgresSessionStore,
    PostgresSharedJobStore,
)
from tests.support.postgres import PostgresServer

from ..conftest import SCOPE, job_id, request

ROOMY: dict[str, Any] = {"max_pending": 1_000, "max_database_bytes": 1 << 30}


@pytest.fixture
async def pg_shared_job_store(
    postgres_url: str, postgres_schema: str
) -> AsyncIterator[PostgresSharedJobStore]:
    store = await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)
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
        # The plain suite runs on the shared store: what ``open_job_store`` opens in production.
        "SqliteJobStore": _OpenAtPath(PostgresSharedJobStore, postgres_url, postgres_schema),
        "SqlitePresetStore": _OpenAtPath(PostgresPresetStore, postgres_url, postgres_schema),
        "SqliteSessionStore": _OpenAtPath(PostgresSessionStore, postgres_url, postgres_schema),
        "SqliteKeyStore": _OpenAtPath(PostgresKeyStore, postgres_url, postgres_schema),
    }

    def patch(module: ModuleType) -> None:
        for name, opener in openers.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, opener)

    return patch


def sql(url: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """One statement on its own autocommit connection (test set-up and inspection)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def schema_exists(url: str, schema: str) -> bool:
    return bool(sql(url, "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)))


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens once the probe closes


@pytest.fixture
def limited_role(postgres_server: PostgresServer) -> Iterator[str]:
    """A login role with no privileges at all until a test grants some."""
    admin = postgres_server.admin_url()
    sql(admin, "CREATE ROLE limited_bridge LOGIN PASSWORD 'limited-pw'")
    try:
        yield postgres_server.url(user="limited_bridge", password="limited-pw")
    finally:
        sql(admin, "DROP OWNED BY limited_bridge")
        sql(admin, "DROP ROLE limited_bridge")


async def submit(store: PostgresSharedJobStore, n: int, prompt: str = "a red fox") -> Any:
    return await store.create(SCOPE, job_id(n), request(prompt), prompt, now=100 + n, **ROOMY)
