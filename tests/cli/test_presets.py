"""Local ``preset`` commands on a PostgreSQL jobs database: the URL is never a file path."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from imagebridge.storage import inspect_store_schema, open_preset_store
from tests.cli.conftest import (
    Cli,
    postgres_env,
    postgres_location,
    postgres_options_for,
    postgres_toml,
)
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres


def _preset_tables_exist(server: PostgresServer, schema: str) -> bool:
    options = postgres_options_for(server, schema)
    status = asyncio.run(
        inspect_store_schema(postgres_location(server), "presets", postgres=options)
    )
    return status.initialized


async def _stored_names(server: PostgresServer, schema: str) -> list[str]:
    options = postgres_options_for(server, schema)
    store = await open_preset_store(postgres_location(server), postgres=options)
    try:
        page = await store.list(limit=10)
        return [record.name for record in page.items]
    finally:
        await store.close()


def _local_files(cli: Cli) -> list[Path]:
    """Databases or URL-shaped paths the commands must not have created on disk."""
    return [
        path
        for path in cli.root.rglob("*")
        if "postgres" in path.name or path.name.endswith(".sqlite3")
    ]


def test_preset_commands_read_and_write_the_postgres_database(
    cli: Cli, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    cli.write("imagegen-bridge.toml", postgres_toml(postgres_server, postgres_schema))
    env = postgres_env(postgres_server)

    assert cli("--json", "preset", "list", env=env).json() == {"items": []}
    missing = cli("--json", "preset", "get", "studio", env=env)
    assert missing.code != 0 and missing.error()["details"]["name"] == "studio"
    assert not _preset_tables_exist(postgres_server, postgres_schema), "reads create nothing"

    created = cli(
        "--json",
        "preset",
        "create",
        "studio",
        "--from",
        "-",
        stdin=b'{"prompt": "a fox in a studio", "parameters": {"size": "64x64"}}',
        env=env,
    )
    assert created.code == 0, created.stderr
    assert asyncio.run(_stored_names(postgres_server, postgres_schema)) == ["studio"]
    listed = cli("--json", "preset", "list", env=env).json()
    assert [item["name"] for item in listed["items"]] == ["studio"]
    planned = cli("--json", "generate", "--preset", "studio", "--dry-run", env=env)
    assert planned.code == 0, planned.stderr
    assert "a fox in a studio" in planned.stdout

    assert cli("--json", "preset", "delete", "studio", "--force", env=env).code == 0
    assert asyncio.run(_stored_names(postgres_server, postgres_schema)) == []
    assert _local_files(cli) == []
    assert postgres_server.password not in created.stdout + created.stderr


def test_preset_commands_need_the_postgres_password_variable(
    cli: Cli, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    cli.write("imagegen-bridge.toml", postgres_toml(postgres_server, postgres_schema))
    result = cli("--json", "preset", "list")
    assert result.code != 0
    assert result.error()["code"] == "configuration"
    assert "postgres_password_env" in result.error()["message"]
    assert _local_files(cli) == []
