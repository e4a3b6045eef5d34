"""Store locations: a path or ``sqlite:///`` URL picks SQLite, a ``postgresql://`` URL PostgreSQL,
anything else is refused (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.location import is_postgres_url, resolve_store_location


def resolve(location: str | Path) -> str | Path:
    return resolve_store_location(location, ErrorCode.INTERNAL, "durable job database")


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("jobs.sqlite3", Path("jobs.sqlite3")),
        ("/var/lib/imagebridge/jobs.sqlite3", Path("/var/lib/imagebridge/jobs.sqlite3")),
        (Path("state/jobs.sqlite3"), Path("state/jobs.sqlite3")),
        ("C:\\data\\jobs.sqlite3", Path("C:\\data\\jobs.sqlite3")),
        ("sqlite:///data/jobs.sqlite3", Path("data/jobs.sqlite3")),
        ("sqlite:////var/lib/jobs.sqlite3", Path("/var/lib/jobs.sqlite3")),
        ("SQLite:///jobs.db", Path("jobs.db")),
        ("postgresql://u:p@db.internal:5432/bridge", "postgresql://u:p@db.internal:5432/bridge"),
        ("postgres://db/bridge?sslmode=require", "postgres://db/bridge?sslmode=require"),
        ("PostgreSQL://db/bridge", "PostgreSQL://db/bridge"),
    ],
)
def test_locations_pick_the_backend(location: str | Path, expected: str | Path) -> None:
    assert resolve(location) == expected


@pytest.mark.parametrize(
    "location",
    [
        "",
        "   ",
        "mysql://db/bridge",
        "sqlite://",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite://host/jobs.db",
        "sqlite:///jobs.db?mode=ro",
        "sqlite:///jobs.db#x",
    ],
)
def test_unusable_locations_are_refused(location: str) -> None:
    with pytest.raises(BridgeError) as caught:
        resolve(location)
    assert caught.value.code is ErrorCode.INTERNAL
    assert caught.value.message.startswith("durable job database")


def test_is_postgres_url() -> None:
    assert is_postgres_url("postgresql://h/db")
    assert is_postgres_url("postgres://h/db")
    for other in ("postgresql:/h/db", "sqlite:///x", "/tmp/postgresql://x", None, 5):
        assert not is_postgres_url(other)
