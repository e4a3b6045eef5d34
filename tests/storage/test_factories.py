"""open_job_store / open_preset_store / open_session_store / inspect_store_schema."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import (
    PostgresOptions,
    PostgresPresetStore,
    PostgresSessionStore,
    PostgresSharedJobStore,
    SharedJobStore,
    SqlitePresetStore,
    SqliteSessionStore,
    SqliteSharedJobStore,
    inspect_store_schema,
    open_job_store,
    open_preset_store,
    open_session_store,
    postgres_options,
    redact_url,
)
from tests.support.postgres import PostgresServer

StoreKind = Literal["jobs", "presets", "sessions"]


async def test_paths_and_sqlite_urls_open_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for location in (tmp_path / "a.sqlite3", str(tmp_path / "b.sqlite3"), "sqlite:///c.sqlite3"):
        jobs = await open_job_store(location)
        try:
            assert isinstance(jobs, SqliteSharedJobStore)
            assert isinstance(jobs, SharedJobStore)
        finally:
            await jobs.close()
    assert (tmp_path / "c.sqlite3").is_file()  # relative to the working directory
    absolute = f"sqlite:///{tmp_path}/d.sqlite3"  # "sqlite:///" + "/tmp/…": four slashes
    presets = await open_preset_store(absolute)
    sessions = await open_session_store(absolute, provider="p")
    try:
        assert isinstance(presets, SqlitePresetStore)
        assert isinstance(sessions, SqliteSessionStore)
    finally:
        await presets.close()
        await sessions.close()
    expected: list[tuple[StoreKind, int | None]] = [
        ("jobs", None),  # never opened at this location
        ("presets", 2),
        ("sessions", 1),
    ]
    for store, version in expected:
        assert (await inspect_store_schema(absolute, store)).version == version


async def test_bad_locations_carry_each_stores_error_code() -> None:
    with pytest.raises(BridgeError) as jobs:
        await open_job_store("mysql://db/x")
    assert jobs.value.code is ErrorCode.INTERNAL
    with pytest.raises(BridgeError) as sessions:
        await open_session_store("sqlite:///:memory:", provider="p")
    assert sessions.value.code is ErrorCode.SESSION


def test_sqlite_stores_do_not_need_psycopg(tmp_path: Path) -> None:
    script = (
        "import asyncio, sys\n"
        "sys.modules['psycopg'] = None  # importing it would now fail\n"
        "from imagebridge.storage import open_job_store\n"
        "async def main():\n"
        f"    store = await open_job_store({str(tmp_path / 'x.sqlite3')!r})\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr


@pytest.mark.postgres
async def test_postgres_urls_open_postgres(postgres_url: str, postgres_schema: str) -> None:
    options = PostgresOptions(schema=postgres_schema, pool_max_size=2)
    jobs = await open_job_store(postgres_url, postgres=options)
    presets = await open_preset_store(postgres_url, postgres=options)
    sessions = await open_session_store(postgres_url, provider="p", postgres=options)
    try:
        assert isinstance(jobs, PostgresSharedJobStore)
        assert jobs.schema == postgres_schema
        assert isinstance(presets, PostgresPresetStore)
        assert isinstance(sessions, PostgresSessionStore)
    finally:
        await jobs.close()
        await presets.close()
        await sessions.close()
    versions: dict[StoreKind, int] = {"jobs": 3, "presets": 2, "sessions": 1}
    for store, version in versions.items():
        status = await inspect_store_schema(postgres_url, store, postgres=options)
        assert (status.version, status.current) == (version, True)


@dataclass(frozen=True)
class Section:
    """What ``server.jobs`` offers ``postgres_options``."""

    postgres_schema: str = "imagebridge"
    postgres_password_env: str | None = None
    postgres_pool_min_size: int = 0
    postgres_pool_max_size: int = 3
    postgres_connect_timeout_ms: int = 2_500


def test_options_follow_the_section_and_read_the_password_variable() -> None:
    options = postgres_options(Section(postgres_password_env="PG_PW"), {"PG_PW": "s3cr&t/@"})
    assert (options.schema, options.pool_min_size, options.pool_max_size) == ("imagebridge", 0, 3)
    assert options.connect_timeout_s == 2.5
    assert "s3cr" not in repr(options)
    assert options.url("postgresql://u@h/db") == "postgresql://u@h/db?password=s3cr%26t%2F%40"
    assert options.url("postgresql://h/db?sslmode=require").endswith(
        "?sslmode=require&password=s3cr%26t%2F%40"
    )
    assert redact_url(options.url("postgresql://u@h/db")) == "postgresql://u@h/db?password=***"
    assert postgres_options(Section(), {}).url("postgresql://h/db") == "postgresql://h/db"
    for env in ({}, {"PG_PW": ""}):
        with pytest.raises(BridgeError) as missing:
            postgres_options(Section(postgres_password_env="PG_PW"), env)
        assert missing.value.code is ErrorCode.CONFIGURATION
        assert missing.value.details == {"field": "server.jobs.postgres_password_env"}


@pytest.mark.postgres
async def test_the_password_comes_from_the_options_not_the_url(
    postgres_server: PostgresServer, postgres_schema: str
) -> None:
    bare = f"postgresql://bridge@{postgres_server.host}:{postgres_server.port}/imagebridge_test"
    section = Section(postgres_schema=postgres_schema, postgres_password_env="PG_PW")
    options = postgres_options(section, {"PG_PW": postgres_server.password})
    jobs = await open_job_store(bare, postgres=options)
    try:
        assert await jobs.healthy()
    finally:
        await jobs.close()
    wrong = postgres_options(section, {"PG_PW": "not-the-password"})
    with pytest.raises(BridgeError) as refused:
        await open_job_store(bare, postgres=wrong)
    assert "not-the-password" not in str(refused.value.to_dict())
