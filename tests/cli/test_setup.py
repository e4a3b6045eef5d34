"""``setup`` (cli.rs 26, 27, 28) and ``doctor``/``auth-doctor``."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Literal

import pytest

from imagebridge.storage import inspect_store_schema
from imagebridge.storage.postgres.job_schema import JOB_SCHEMA
from imagebridge.storage.postgres.presets import PRESET_SCHEMA
from imagebridge.storage.postgres.sessions import SESSION_SCHEMA
from tests.cli.conftest import (
    Cli,
    fake_executable,
    postgres_env,
    postgres_location,
    postgres_options_for,
    postgres_toml,
)
from tests.support.postgres import PostgresServer

PLAN_KINDS = [
    "create_config",
    "create_private_state_directory",
    "create_output_directory",
    "migrate_session_database",
    "migrate_job_database",
]


def _codex(cli: Cli, *, login: bool = True) -> dict[str, str]:
    """A fake `codex` on PATH and (optionally) a protected ChatGPT login."""
    bin_dir = cli.root / "bin"
    fake_executable(bin_dir, "codex", 'echo "codex-cli 0.169.0"')
    home = Path(cli.env["CODEX_HOME"])
    if login:
        home.mkdir(parents=True, exist_ok=True)
        auth = home / "auth.json"
        auth.write_text(json.dumps({"auth_mode": "chatgpt", "tokens": {"access_token": "tok-x"}}))
        auth.chmod(0o600)
    return {"PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}


def _app_server(enabled: bool) -> dict[str, str]:
    return {"IMAGEGEN_BRIDGE__PROVIDERS__CODEX_APP_SERVER__ENABLED": str(enabled).lower()}


def test_dry_run_is_machine_readable_and_creates_nothing(cli: Cli) -> None:
    """cli.rs 26."""
    before = sorted(cli.root.rglob("*"))
    result = cli("--json", "setup", "--dry-run", env={"PATH": "/nonexistent"})
    assert result.code == 0, result.stderr
    plan = result.json()
    assert plan["oauth_ready"] is False and plan["codex"] == {"available": False, "version": None}
    assert [change["kind"] for change in plan["planned_changes"]] == PLAN_KINDS
    assert plan["config_path"] == str(Path(cli.env["XDG_CONFIG_HOME"]) / "imagegen-bridge" /
                                      "config.toml")  # fmt: skip
    assert sorted(cli.root.rglob("*")) == before


def test_non_interactive_refuses_unconfirmed_changes(cli: Cli) -> None:
    """cli.rs 27: the plan on stdout, the refusal on stderr, nothing written."""
    result = cli("setup", "--non-interactive")
    assert result.code == 2
    assert json.loads(result.stdout)["planned_changes"]
    assert "confirmation is required; rerun with --yes or use --dry-run" in result.stderr
    assert not (Path(cli.env["XDG_CONFIG_HOME"]) / "imagegen-bridge").exists()
    assert cli("--json", "setup").code == 2, "machine modes never prompt either"


def test_setup_rejects_overrides(cli: Cli) -> None:
    result = cli("--set", "version=1", "setup", "--dry-run")
    assert result.code == 2 and "--set/--unset cannot be used" in result.stderr


def test_setup_applies_once_then_doctor_passes_without_a_paid_probe(cli: Cli) -> None:
    """cli.rs 28."""
    env = {**_codex(cli), **_app_server(True)}
    first = cli("--json", "setup", "--yes", env=env)
    assert first.code == 0, first.stderr
    body = first.json()
    assert body["complete"] is True and body["changed"] is True
    assert [change["kind"] for change in body["applied_changes"]] == PLAN_KINDS
    assert body["codex"] == {"available": True, "version": "codex-cli 0.169.0"}
    assert body["database_schema"]["version"] == body["database_schema"]["current_version"]
    config = Path(body["config_path"])
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(body["state_root"]).stat().st_mode) == 0o700
    assert Path(body["output_root"]).is_dir()
    assert "tok-x" not in config.read_text() + first.stdout
    second = cli("--json", "setup", "--yes", env=env)
    assert second.json()["changed"] is False and second.json()["applied_changes"] == []
    doctor = cli("--json", "doctor", env=_app_server(False))
    assert doctor.code == 0, doctor.stdout
    report = doctor.json()
    assert report["ok"] is True
    checks = {check["name"]: check["status"] for check in report["checks"]}
    assert checks["live_probe"] == "skip" and checks["configuration_file"] == "pass"
    assert report["summary"]["failed"] == 0


def test_setup_repairs_a_too_open_state_directory(cli: Cli) -> None:
    env = {**_codex(cli), **_app_server(True)}
    state = cli.root / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    plan = cli("--json", "setup", "--dry-run", "--state-root", str(state), env=env).json()
    assert "repair_private_state_directory" in [c["kind"] for c in plan["planned_changes"]]
    assert cli("--json", "setup", "--yes", "--state-root", str(state), env=env).code == 0
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_setup_keeps_an_existing_config_and_only_changes_flagged_paths(cli: Cli) -> None:
    env = {**_codex(cli), **_app_server(True)}
    existing = cli.write("imagegen-bridge.toml", 'version = 1\n[artifacts]\nroot = "/tmp/keep"\n')
    plan = cli("--json", "setup", "--dry-run", env=env).json()
    assert plan["config_path"] == str(existing)
    assert plan["output_root"] == "/tmp/keep"
    assert plan["planned_changes"][0]["kind"] == "update_config"  # jobs database was default


def test_setup_exit_codes_for_missing_codex_and_login(cli: Cli) -> None:
    no_codex = cli("--json", "setup", "--yes", env={"PATH": "/nonexistent", **_app_server(True)})
    assert no_codex.code == 2 and no_codex.error()["code"] == "configuration"
    env = {**_codex(cli, login=False), **_app_server(True)}
    no_login = cli("--json", "setup", "--yes", env=env)
    assert no_login.code == 3
    assert "Sign in: codex login" in json.loads(no_login.stdout.splitlines()[0])["next_steps"]


def test_setup_does_not_need_codex_when_only_http_providers_are_enabled(cli: Cli) -> None:
    result = cli("--json", "setup", "--yes", env={"PATH": "/nonexistent"})
    assert result.code == 0, result.stderr
    assert result.json()["complete"] is True


def test_doctor_fails_without_a_config_file_and_reports_every_check(cli: Cli) -> None:
    result = cli("--json", "doctor")
    assert result.code == 2
    report = result.json()
    names = [check["name"] for check in report["checks"]]
    assert names[:4] == ["bridge_executable", "configuration_file", "configuration",
                         "codex_executable"]  # fmt: skip
    assert names[-1] == "live_probe"
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert statuses["configuration_file"] == "fail"
    assert statuses["artifact_storage"] == "warn"  # not created yet, creatable
    assert statuses["provider_readiness"] == "pass"
    assert report["summary"]["failed"] == 1


def test_doctor_blocks_provider_checks_when_codex_is_required_but_missing(cli: Cli) -> None:
    env = {"PATH": "/nonexistent", **_app_server(True)}
    cli.write("imagegen-bridge.toml", "version = 1\n")
    report = cli("--json", "doctor", env=env).json()
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert statuses["codex_executable"] == "fail"
    assert statuses["provider_readiness"] == "skip"


def test_doctor_warns_when_the_port_is_taken(cli: Cli) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        report = cli("--json", "--set", f'server.bind="127.0.0.1:{port}"', "doctor").json()
    port_check = next(check for check in report["checks"] if check["name"] == "server_port")
    assert port_check["status"] == "warn"


def test_doctor_live_probe_needs_confirmation_and_runs_with_yes(cli: Cli) -> None:
    cli.write("imagegen-bridge.toml", "version = 1\n")
    unconfirmed = cli("--json", "doctor", "--live-probe", "--non-interactive").json()
    probe = next(check for check in unconfirmed["checks"] if check["name"] == "live_probe")
    assert probe["status"] == "skip" and "live_probe" not in unconfirmed
    confirmed = cli("--json", "doctor", "--live-probe", "--yes")
    assert confirmed.code == 0, confirmed.stdout
    result = confirmed.json()["live_probe"]
    assert result["provider"] == "mock" and result["images"] == 1 and result["format"] == "png"
    assert not list(cli.artifacts.glob("*.png")), "the probe keeps no image bytes"


RESPONSES_ON = {"IMAGEGEN_BRIDGE__PROVIDERS__CODEX_RESPONSES__ENABLED": "true"}


@pytest.mark.parametrize(("login", "code"), [(True, 0), (False, 3)])
def test_auth_doctor_checks_the_codex_login_without_generating(
    cli: Cli, login: bool, code: int
) -> None:
    env = {**_codex(cli, login=login), **RESPONSES_ON}
    result = cli("--json", "auth-doctor", env=env)
    assert result.code == code
    body = json.loads(result.stdout)
    assert body["authenticated"] is (code == 0)
    assert [item["provider"] for item in body["providers"]] == ["codex-responses"]
    assert "tok-x" not in result.stdout + result.stderr


def test_doctor_reports_quota_when_the_provider_exposes_it(cli: Cli) -> None:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.cli.servers import serving

    async def usage(_: object) -> JSONResponse:
        window = {"used_percent": 42, "limit_window_seconds": 18000, "reset_after_seconds": 60}
        return JSONResponse({"plan_type": "plus", "rate_limit": {"primary_window": window}})

    cli.write("imagegen-bridge.toml", "version = 1\n")
    with serving(Starlette(routes=[Route("/wham/usage", usage)])) as url:
        env = {
            **_codex(cli),
            **RESPONSES_ON,
            "IMAGEGEN_BRIDGE__PROVIDERS__CODEX_RESPONSES__USAGE_ENDPOINT": f"{url}/wham/usage",
        }
        report = cli("--json", "doctor", "--provider", "codex-responses", env=env).json()
    quota = next(check for check in report["checks"] if check["name"] == "provider_quota")
    assert quota["status"] == "pass", quota
    assert "42" in json.dumps(quota["details"])


def test_setup_live_probe_runs_one_generation_after_confirmation(cli: Cli) -> None:
    result = cli("--json", "setup", "--yes", "--live-probe", env={"PATH": "/nonexistent"})
    assert result.code == 0, result.stderr
    probe = result.json()["live_probe"]
    assert probe["status"] == "passed" and probe["provider"] == "mock" and probe["images"] == 1
    unconfirmed = cli("--json", "setup", "--non-interactive", "--live-probe")
    assert unconfirmed.json()["live_probe"] == {
        "status": "skipped",
        "reason": "confirmation_required",
    }


# -- databases in PostgreSQL -------------------------------------------------------------------


def _pg_status(
    server: PostgresServer, schema: str, store: Literal["jobs", "presets", "sessions"]
) -> tuple[bool, int | None]:
    location, options = postgres_location(server), postgres_options_for(server, schema)
    status = asyncio.run(inspect_store_schema(location, store, postgres=options))
    return status.initialized, status.version


def _pg_paths(root: Path) -> list[Path]:
    """Anything a URL mistaken for a path would have created (``postgresql:/…``)."""
    return [path for path in root.rglob("*") if "postgres" in path.name]


@pytest.mark.postgres
def test_setup_migrates_postgres_databases_and_creates_no_local_state(
    cli: Cli, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    toml = postgres_toml(postgres_server, postgres_schema)
    config = cli.write("imagegen-bridge.toml", toml)
    env = postgres_env(postgres_server)
    url = postgres_location(postgres_server)

    plan = cli("--json", "setup", "--dry-run", env=env).json()
    assert plan["planned_changes"] == [
        {"kind": "create_output_directory", "path": str(cli.artifacts)},
        {"kind": "migrate_session_database", "path": url},
        {"kind": "migrate_job_database", "path": url},
    ]
    assert plan["state_root"] is None
    assert _pg_status(postgres_server, postgres_schema, "jobs") == (False, None)

    applied = cli("--json", "setup", "--yes", env=env)
    assert applied.code == 0, applied.stderr
    body = applied.json()
    assert body["state_root"] is None
    assert body["database_schema"]["version"] == body["database_schema"]["current_version"]
    assert body["job_database_schema"]["version"] == body["job_database_schema"]["current_version"]
    for store, schema in (
        ("sessions", SESSION_SCHEMA),
        ("jobs", JOB_SCHEMA),
        ("presets", PRESET_SCHEMA),
    ):
        assert _pg_status(postgres_server, postgres_schema, store) == (True, schema.current_version)
    assert config.read_text() == toml  # the URLs stay; nothing else needed writing
    assert _pg_paths(cli.root) == []
    assert not (Path(cli.env["XDG_STATE_HOME"]) / "imagegen-bridge").exists()
    assert postgres_server.password not in applied.stdout + applied.stderr

    again = cli("--json", "setup", "--yes", env=env).json()
    assert again["changed"] is False and again["applied_changes"] == []


@pytest.mark.postgres
def test_setup_state_root_moves_sqlite_files_but_keeps_postgres_urls(
    cli: Cli, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    jobs_only = postgres_toml(postgres_server, postgres_schema, sessions=False)
    config = cli.write("imagegen-bridge.toml", jobs_only)
    state = cli.root / "state"
    env = postgres_env(postgres_server)
    result = cli("--json", "setup", "--yes", "--state-root", str(state), env=env)
    assert result.code == 0, result.stderr
    kinds = [(change["kind"], change["path"]) for change in result.json()["applied_changes"]]
    assert kinds == [
        ("update_config", str(config)),
        ("create_private_state_directory", str(state)),
        ("create_output_directory", str(cli.artifacts)),
        ("migrate_session_database", str(state / "sessions.sqlite3")),
        ("migrate_job_database", postgres_location(postgres_server)),
    ]
    written = tomllib.loads(config.read_text())
    assert written["server"]["jobs"]["database"] == postgres_location(postgres_server)
    assert written["providers"]["codex_app_server"]["session_database"] == str(
        state / "sessions.sqlite3"
    )
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert sorted(path.name for path in state.iterdir()) == ["sessions.sqlite3"]
    assert _pg_status(postgres_server, postgres_schema, "jobs") == (
        True,
        JOB_SCHEMA.current_version,
    )
    assert _pg_paths(cli.root) == []


@pytest.mark.postgres
def test_setup_refuses_a_postgres_database_without_its_password_variable(
    cli: Cli, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    cli.write("imagegen-bridge.toml", postgres_toml(postgres_server, postgres_schema))
    result = cli("--json", "setup", "--yes")
    assert result.code == 2
    assert result.error()["code"] == "configuration"
    assert "postgres_password_env" in result.error()["message"]
    assert not cli.artifacts.exists()
    assert _pg_status(postgres_server, postgres_schema, "jobs") == (False, None)
