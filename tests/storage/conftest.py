"""Shared helpers for the storage tests: paths, deterministic ids, requests, open stores, and a
storage health cleared around every test.

The session's PostgreSQL server (``tests/support/postgres.py``) is registered once for the
whole suite in ``tests/conftest.py``; ``shared_backend`` / ``open_shared`` run the shared-queue
tests once per backend.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from imagebridge.storage import PostgresSharedJobStore, SharedJobStore, SqliteSharedJobStore
from imagebridge.storage.sqlite.jobs import SqliteJobStore

OpenShared = Callable[[], Awaitable[SharedJobStore]]

SCOPE = "bearer:" + "a" * 64
OTHER_SCOPE = "anonymous-local"
ROOMY = {"max_pending": 1_000, "max_database_bytes": 1 << 30}


def job_id(n: int) -> str:
    """Canonical UUIDv7-shaped ids whose text order follows ``n``."""
    return f"01900000-0000-7000-8000-{n:012x}"


def request(prompt: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "version": "1",
        "prompt": prompt,
        "output": {"response_format": "artifact"},
    }
    body.update(extra)
    return body


def fingerprint(body: dict[str, Any]) -> str:
    trimmed = {k: v for k, v in body.items() if k not in {"idempotency_key", "timeout_ms"}}
    canonical = json.dumps(trimmed, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def response(job: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": job,
        "created": 1,
        "provider": "mock",
        "model": "mock-image",
        "data": [{"type": "artifact", "artifact_id": "a1", "path": "/tmp/x.png"}],
    }
    body.update(extra)
    return body


@pytest.fixture(autouse=True)
def _fresh_health(fresh_storage_health: None) -> None:
    """Every storage test starts and ends with no recorded storage fault (the fault tests
    record some)."""


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "jobs.sqlite3"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteJobStore]:
    opened = await SqliteJobStore.open(db_path)
    try:
        yield opened
    finally:
        await opened.close()


async def submit(
    store: SqliteJobStore,
    n: int,
    prompt: str = "a red fox",
    *,
    scope: str = SCOPE,
    now: int | None = None,
    key: str | None = None,
    body: dict[str, Any] | None = None,
    max_pending: int = 1_000,
    max_database_bytes: int = 1 << 30,
) -> Any:
    payload = body if body is not None else request(prompt)
    return await store.create(
        scope,
        job_id(n),
        payload,
        payload["prompt"],
        submission_key=key,
        fingerprint=fingerprint(payload) if key is not None else None,
        now=now if now is not None else 1_000 + n,
        max_pending=max_pending,
        max_database_bytes=max_database_bytes,
    )


# -- both backends ---------------------------------------------------------------------------


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def shared_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def open_shared(
    shared_backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[OpenShared]:
    """Each call opens one more store (one more "instance") on the same database."""
    opened: list[SharedJobStore] = []
    if shared_backend == "postgres":
        url = request.getfixturevalue("postgres_url")
        schema = request.getfixturevalue("postgres_schema")

        async def open_store() -> SharedJobStore:
            store = await PostgresSharedJobStore.open(url, schema=schema)
            opened.append(store)
            return store

    else:
        path = tmp_path / "jobs.sqlite3"

        async def open_store() -> SharedJobStore:
            store = await SqliteSharedJobStore.open(path, event_poll_interval_s=0.01)
            opened.append(store)
            return store

    try:
        yield open_store
    finally:
        for store in opened:
            await store.close()


@pytest.fixture
async def shared_store(open_shared: OpenShared) -> SharedJobStore:
    return await open_shared()
