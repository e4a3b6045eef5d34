"""Shared helpers for the storage tests: paths, deterministic ids, requests, open stores."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from imagebridge.storage.jobs import SqliteJobStore

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
