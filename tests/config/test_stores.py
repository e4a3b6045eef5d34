"""Store locations (paths or database URLs) and the shared-mode keys of ``[server.jobs]``."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from imagebridge.config import BridgeConfig, check, show, to_toml
from imagebridge.config.store_checks import is_postgres_location
from tests.config.conftest import World

URL = "postgresql://bridge@db.internal:5432/images?sslmode=require"
SOCKET_URL = "postgresql:///images?host=/run/postgresql"


def _issues(**jobs: Any) -> set[tuple[str, str]]:
    config = BridgeConfig.model_validate({"server": {"jobs": jobs}})
    return {(issue.field, issue.code) for issue in check(config)}


def test_urls_are_kept_verbatim_and_paths_stay_paths(world: World) -> None:
    path = world.write(
        "bridge.toml",
        f'[server.jobs]\ndatabase = "{SOCKET_URL}"\n'
        f'[providers.codex_app_server]\nsession_database = "{URL}"\n',
    )
    config = world.load(config_path=path).config
    # Path() would have folded "postgresql:///images" into "postgresql:/images".
    assert config.server.jobs.database == SOCKET_URL
    assert config.providers.codex_app_server.session_database == URL
    assert is_postgres_location(config.server.jobs.database)

    relative = world.load(sets=['server.jobs.database="state/jobs.sqlite3"']).config
    assert relative.server.jobs.database == Path("state/jobs.sqlite3")
    assert not is_postgres_location(relative.server.jobs.database)
    assert not is_postgres_location(Path("postgresql:/looks/like/a/url"))


def test_a_url_survives_show_toml_and_reload(world: World) -> None:
    loaded = world.load(IMAGEGEN_BRIDGE__SERVER__JOBS__DATABASE=f'"{URL}"').config
    assert loaded.server.jobs.database == URL
    shown = show(loaded)
    assert shown["server"]["jobs"]["database"] == URL
    text = to_toml(shown)
    assert tomllib.loads(text)["server"]["jobs"]["database"] == URL
    reloaded = world.load(config_path=world.write("round.toml", text)).config
    assert reloaded.server.jobs.database == URL
    assert reloaded == loaded


@pytest.mark.parametrize(
    "location",
    [
        URL,
        SOCKET_URL,
        "postgres://db.internal/images",
        "POSTGRESQL://db.internal/images",
        "postgresql://bridge@[::1]:5432/images",
        "sqlite:///state/jobs.sqlite3",
        "sqlite:////var/lib/imagebridge/jobs.sqlite3",
        "jobs.sqlite3",
        "/var/lib/imagebridge/jobs.sqlite3",
    ],
)
def test_usable_locations_report_nothing(location: str) -> None:
    assert _issues(database=location) == set()


@pytest.mark.parametrize(
    ("location", "code"),
    [
        ("postgresql://bridge:secret@db.internal/images", "credentials_in_url"),
        ("postgresql://bridge:@db.internal/images", "credentials_in_url"),
        ("postgresql://db.internal/images?sslmode=require&Password=x", "credentials_in_url"),
        ("postgresql://db.internal:notaport/images", "invalid"),
        ("postgresql://db.internal/images#frag", "invalid"),
        ("mysql://db.internal/images", "unsupported_scheme"),
        ("https://db.internal/images", "unsupported_scheme"),
        ("sqlite://host/jobs.sqlite3", "invalid"),
        ("sqlite:///", "invalid"),
        ("sqlite:///:memory:", "invalid"),
        ("sqlite:///jobs.sqlite3?mode=ro", "invalid"),
    ],
)
def test_unusable_locations_are_reported_without_their_value(location: str, code: str) -> None:
    config = BridgeConfig.model_validate({"server": {"jobs": {"database": location}}})
    issues = [issue for issue in check(config) if issue.field == "server.jobs.database"]
    assert [issue.code for issue in issues] == [code]
    assert all(
        "secret" not in issue.message and "db.internal" not in issue.message for issue in issues
    )


def test_session_database_follows_the_same_rules() -> None:
    config = BridgeConfig.model_validate(
        {"providers": {"codex_app_server": {"session_database": "postgresql://u:pw@h/db"}}}
    )
    fields = {(issue.field, issue.code) for issue in check(config)}
    assert ("providers.codex_app_server.session_database", "credentials_in_url") in fields


def test_disabled_jobs_do_not_check_their_database() -> None:
    assert _issues(enabled=False, database="mysql://x/y", lease_secs=0) == set()


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        ({"instance_id": ""}, ("server.jobs.instance_id", "invalid")),
        ({"instance_id": "has space"}, ("server.jobs.instance_id", "invalid")),
        ({"instance_id": "-leading-dash"}, ("server.jobs.instance_id", "invalid")),
        ({"instance_id": "x" * 129}, ("server.jobs.instance_id", "invalid")),
        ({"lease_secs": 0, "heartbeat_secs": 0}, ("server.jobs.lease_secs", "out_of_range")),
        ({"lease_secs": 7 * 24 * 3600 + 1}, ("server.jobs.lease_secs", "out_of_range")),
        ({"heartbeat_secs": 0}, ("server.jobs.heartbeat_secs", "out_of_range")),
        ({"lease_secs": 10, "heartbeat_secs": 6}, ("server.jobs.heartbeat_secs", "inconsistent")),
        ({"poll_interval_ms": 9}, ("server.jobs.poll_interval_ms", "out_of_range")),
        ({"poll_interval_ms": 60_001}, ("server.jobs.poll_interval_ms", "out_of_range")),
        ({"postgres_schema": "Bridge"}, ("server.jobs.postgres_schema", "invalid")),
        ({"postgres_schema": "pg_catalog"}, ("server.jobs.postgres_schema", "invalid")),
        ({"postgres_schema": "a" * 49}, ("server.jobs.postgres_schema", "invalid")),
        ({"postgres_password_env": "pg-pass"}, ("server.jobs.postgres_password_env", "invalid")),
        ({"postgres_pool_max_size": 0}, ("server.jobs.postgres_pool_max_size", "out_of_range")),
        ({"postgres_pool_max_size": 101}, ("server.jobs.postgres_pool_max_size", "out_of_range")),
        ({"postgres_pool_min_size": 101}, ("server.jobs.postgres_pool_min_size", "out_of_range")),
        (
            {"postgres_pool_min_size": 6, "postgres_pool_max_size": 5},
            ("server.jobs.postgres_pool_min_size", "inconsistent"),
        ),
        (
            {"postgres_connect_timeout_ms": 99},
            ("server.jobs.postgres_connect_timeout_ms", "out_of_range"),
        ),
    ],
)
def test_shared_mode_rules(jobs: dict[str, Any], expected: tuple[str, str]) -> None:
    assert expected in _issues(**jobs)


def test_shared_mode_edges_are_accepted() -> None:
    assert (
        _issues(
            instance_id="node-1.eu:8787@rack_2",
            lease_secs=2,
            heartbeat_secs=1,
            poll_interval_ms=10,
            postgres_schema="_bridge_2",
            postgres_password_env="IMAGEBRIDGE_PG_PASSWORD",
            postgres_pool_min_size=0,
            postgres_pool_max_size=100,
            postgres_connect_timeout_ms=100,
        )
        == set()
    )
