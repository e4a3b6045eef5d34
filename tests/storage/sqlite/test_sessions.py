"""SqliteSessionStore: the four sqlite_sessions.rs tests of the original plus error codes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import SessionStore, SqliteSessionStore
from imagebridge.storage.sqlite.sessions import inspect_session_schema


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sessions.sqlite3"


async def test_schema_inspection_is_read_only_and_reports_migration_version(path: Path) -> None:
    before = await inspect_session_schema(path)
    assert before.to_dict() == {"initialized": False, "version": None, "current_version": 1}
    assert os.listdir(path.parent.parent) == []  # neither the file nor its directory

    store = await SqliteSessionStore.open(path, provider="codex-app-server")
    await store.close()
    after = await inspect_session_schema(path)
    assert after.to_dict() == {"initialized": True, "version": 1, "current_version": 1}
    assert after.current
    # Inspecting a cleanly closed database leaves no side files behind.
    assert sorted(os.listdir(path.parent)) == ["sessions.sqlite3"]


async def test_binding_survives_database_reopen(path: Path) -> None:
    store = await SqliteSessionStore.open(path, provider="codex-app-server")
    await store.put("project-a", "thread-1", now=10)
    await store.put("project-a", "thread-2", now=11)
    await store.close()

    reopened = await SqliteSessionStore.open(path, provider="codex-app-server")
    try:
        assert await reopened.get("project-a") == "thread-2"
        assert await reopened.delete("project-a") is True
        assert await reopened.get("project-a") is None
        assert await reopened.delete("project-a") is False
    finally:
        await reopened.close()


async def test_providers_have_independent_namespaces(path: Path) -> None:
    first = await SqliteSessionStore.open(path, provider="alpha")
    second = await SqliteSessionStore.open(path, provider="beta")
    try:
        await first.put("shared-key", "alpha-thread")
        await second.put("shared-key", "beta-thread")
        assert await first.get("shared-key") == "alpha-thread"
        assert await second.get("shared-key") == "beta-thread"
        await first.delete("shared-key")
        assert await second.get("shared-key") == "beta-thread"
    finally:
        await first.close()
        await second.close()


async def test_rejects_empty_or_control_character_identifiers(path: Path) -> None:
    async with await SqliteSessionStore.open(path, provider="p") as store:
        bad_calls = [
            store.put("", "thread"),
            store.put("   ", "thread"),
            store.put("key", "thread\nid"),
            store.put("key", "t" * 513),
            store.get("k\x00"),
            store.delete("\x1b"),
        ]
        for call in bad_calls:
            with pytest.raises(BridgeError) as caught:
                await call
            assert caught.value.code is ErrorCode.SESSION
            assert caught.value.message.startswith("invalid ")
        assert await store.get("key") is None
        await store.put("k" * 512, "t" * 512)
        assert await store.get("k" * 512) == "t" * 512
    with pytest.raises(BridgeError) as caught:
        await SqliteSessionStore.open(path, provider="")
    assert (caught.value.code, caught.value.message) == (
        ErrorCode.SESSION,
        "invalid session provider",
    )


async def test_storage_failures_are_session_errors(tmp_path: Path) -> None:
    real = tmp_path / "real.sqlite3"
    await (await SqliteSessionStore.open(real, provider="p")).close()
    link = tmp_path / "link.sqlite3"
    link.symlink_to(real)
    with pytest.raises(BridgeError) as symlinked:
        await SqliteSessionStore.open(link, provider="p")
    assert symlinked.value.code is ErrorCode.SESSION
    with pytest.raises(BridgeError) as inspected:
        await inspect_session_schema(link)
    assert inspected.value.code is ErrorCode.SESSION

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(BridgeError) as not_regular:
        await inspect_session_schema(fifo)
    assert not_regular.value.code is ErrorCode.SESSION
    assert not_regular.value.message == "session database path must be a regular file"

    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(BridgeError) as corrupt:
        await SqliteSessionStore.open(garbage, provider="p")
    assert corrupt.value.code is ErrorCode.SESSION


async def test_store_satisfies_the_protocol(path: Path) -> None:
    async with await SqliteSessionStore.open(path, provider="p") as store:
        assert isinstance(store, SessionStore)
        assert store.provider == "p"
