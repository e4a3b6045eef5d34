"""``doctor`` with its stores in PostgreSQL: schemas inspected, no local files checked or made."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest

from imagebridge.storage import open_job_store, open_session_store
from tests.cli.conftest import (
    PG_PASSWORD_ENV,
    Cli,
    postgres_env,
    postgres_location,
    postgres_options_for,
    postgres_toml,
)
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

STORE_CHECKS = ("database_migrations", "job_database_migrations")


def _checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def _stray_files(root: Path) -> list[Path]:
    """Anything a URL mistaken for a path would have created (``postgresql:/…``)."""
    return [path for path in root.rglob("*") if "postgres" in path.name]


async def _migrate(server: PostgresServer, schema: str) -> None:
    options = postgres_options_for(server, schema)
    location = postgres_location(server)
    await (await open_job_store(location, postgres=options)).close()
    await (
        await open_session_store(location, provider="codex-app-server", postgres=options)
    ).close()


def test_doctor_inspects_postgres_schemas_instead_of_local_files(
    cli: Cli, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    cli.write("imagegen-bridge.toml", postgres_toml(postgres_server, postgres_schema))
    env = postgres_env(postgres_server)

    fresh = cli("--json", "doctor", env=env)
    assert fresh.code == 0, fresh.stdout
    checks = _checks(fresh.json())
    assert checks["state_storage"]["status"] == "skip"
    assert checks["job_state_storage"]["status"] == "skip"
    for name in STORE_CHECKS:
        check = checks[name]
        assert check["status"] == "warn", check
        assert "created on first use" in check["message"]
        assert check["details"]["url"] == postgres_location(postgres_server)
        assert check["details"]["schema"] == postgres_schema
        assert check["details"]["initialized"] is False
    assert checks["provider_readiness"]["status"] == "pass"
    assert postgres_server.password not in fresh.stdout + fresh.stderr

    asyncio.run(_migrate(postgres_server, postgres_schema))
    migrated = _checks(cli("--json", "doctor", env=env).json())
    for name in STORE_CHECKS:
        assert migrated[name]["status"] == "pass", migrated[name]
        assert migrated[name]["details"]["version"] == migrated[name]["details"]["current_version"]
    assert _stray_files(cli.root) == []


def test_doctor_fails_a_postgres_schema_written_by_a_newer_bridge(
    cli: Cli, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    cli.write("imagegen-bridge.toml", postgres_toml(postgres_server, postgres_schema))
    asyncio.run(_migrate(postgres_server, postgres_schema))
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {postgres_schema}.schema_migrations VALUES ('jobs', 99, 1)"  # noqa: S608
        )
    result = cli("--json", "doctor", env=postgres_env(postgres_server))
    assert result.code == 2
    checks = _checks(result.json())
    assert checks["job_database_migrations"]["status"] == "fail"
    assert checks["job_database_migrations"]["message"] == "database was written by a newer bridge"
    assert checks["database_migrations"]["status"] == "pass"
    assert checks["provider_readiness"]["status"] == "skip"


def test_doctor_reports_a_missing_password_variable_and_an_unreachable_server(
    cli: Cli, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    cli.write("imagegen-bridge.toml", postgres_toml(postgres_server, postgres_schema))
    missing = _checks(cli("--json", "doctor").json())
    for name in STORE_CHECKS:
        assert missing[name]["status"] == "fail"
        assert "postgres_password_env" in missing[name]["message"]

    wrong = cli("--json", "doctor", env={PG_PASSWORD_ENV: "not-the-password"})
    assert wrong.code == 2
    checks = _checks(wrong.json())
    for name in STORE_CHECKS:
        assert checks[name]["status"] == "fail"
        assert checks[name]["details"]["url"] == postgres_location(postgres_server)
    assert "not-the-password" not in wrong.stdout + wrong.stderr
    assert _stray_files(cli.root) == []


def test_doctor_checks_the_job_directory_when_only_sessions_use_postgres(
    cli: Cli, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    jobs = cli.root / "jobs-state" / "jobs.sqlite3"
    config = postgres_toml(postgres_server, postgres_schema).replace(
        f'\ndatabase = "{postgres_location(postgres_server)}"', f'\ndatabase = "{jobs}"'
    )
    cli.write("imagegen-bridge.toml", config)
    checks = _checks(cli("--json", "doctor", env=postgres_env(postgres_server)).json())
    assert checks["state_storage"]["status"] == "skip"
    assert checks["job_state_storage"]["status"] == "warn"  # not created yet, creatable
    assert checks["job_state_storage"]["details"] == {"path": str(jobs.parent)}
    assert checks["job_database_migrations"]["details"]["path"] == str(jobs)
    assert checks["database_migrations"]["details"]["url"] == postgres_location(postgres_server)
    assert not jobs.parent.exists()
