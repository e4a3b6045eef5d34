"""PostgresSessionStore specifics: every failure is a ``session`` error; inspection."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import PostgresSessionStore
from imagebridge.storage.postgres.sessions import inspect_session_schema

pytestmark = pytest.mark.postgres


async def test_storage_failures_are_session_errors(postgres_url: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cases: list[tuple[str, dict[str, Any]]] = [
        (f"postgresql://bridge:pw@127.0.0.1:{port}/db", {}),
        (postgres_url, {"schema": "Not Valid"}),
        ("sqlite:///not-a-postgres-url", {}),
    ]
    for url, options in cases:
        with pytest.raises(BridgeError) as caught:
            await PostgresSessionStore.open(url, provider="p", **options)
        assert caught.value.code is ErrorCode.SESSION
    store = await PostgresSessionStore.open(postgres_url, provider="p", schema="t_sessions_closed")
    await store.close()
    with pytest.raises(BridgeError) as closed:
        await store.get("k")
    assert (closed.value.code, closed.value.message) == (
        ErrorCode.SESSION,
        "session database is closed",
    )


async def test_inspection_reports_the_session_schema(
    postgres_url: str, postgres_schema: str
) -> None:
    before = await inspect_session_schema(postgres_url, schema=postgres_schema)
    assert before.to_dict() == {"initialized": False, "version": None, "current_version": 1}
    async with await PostgresSessionStore.open(
        postgres_url, provider="codex-app-server", schema=postgres_schema
    ) as store:
        await store.put("project", "thread-1", now=5)
        await store.put("project", "thread-2", now=3)  # a clock that went backwards
        assert await store.get("project") == "thread-2"
    after = await inspect_session_schema(postgres_url, schema=postgres_schema)
    assert (after.version, after.current) == (1, True)
