"""Reaching PostgreSQL: UTF-8 servers only, retryable when away, and the password never shown."""

from __future__ import annotations

import json
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import (
    PostgresPresetStore,
    PostgresSharedJobStore,
)
from tests.support.postgres import PostgresServer

from .conftest import sql

pytestmark = pytest.mark.postgres


async def test_non_utf8_databases_are_refused(postgres_server: PostgresServer) -> None:
    admin = postgres_server.admin_url()
    sql(
        admin,
        "CREATE DATABASE ascii_db ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' "
        "TEMPLATE template0 OWNER bridge",
    )
    try:
        with pytest.raises(BridgeError) as caught:
            await PostgresSharedJobStore.open(postgres_server.url(database="ascii_db"))
        assert caught.value.message == "durable job database must use UTF8 encoding"
        assert caught.value.details == {"server_encoding": "SQL_ASCII"}
    finally:
        sql(admin, "DROP DATABASE ascii_db")


def assert_secret_hidden(error: BridgeError, secret: str) -> None:
    shown = json.dumps(error.to_dict()) + str(error) + repr(error)
    assert secret not in shown


async def test_unreachable_server_is_a_retryable_error(closed_port: int) -> None:
    secret = "s3cret-unreachable"
    url = f"postgresql://bridge:{secret}@127.0.0.1:{closed_port}/db"
    with pytest.raises(BridgeError) as caught:
        await PostgresSharedJobStore.open(url, connect_timeout_s=5)
    assert (caught.value.code, caught.value.message) == (
        ErrorCode.INTERNAL,
        "durable job database is unavailable",
    )
    assert caught.value.retryable
    assert_secret_hidden(caught.value, secret)


async def test_refused_logins_say_why_without_the_password(
    postgres_server: PostgresServer,
) -> None:
    wrong = "wrong-password-123"
    for url, why in (
        (postgres_server.url(password=wrong), "password authentication failed"),
        (postgres_server.url(database="no_such_database"), "does not exist"),
    ):
        with pytest.raises(BridgeError) as caught:
            await PostgresPresetStore.open(url)
        assert caught.value.message == "preset database is unavailable"
        assert why in caught.value.details["reason"]
        assert_secret_hidden(caught.value, wrong)
        assert_secret_hidden(caught.value, postgres_server.password)


async def test_malformed_urls_and_options_are_refused() -> None:
    secret = "pw in a bad url"  # libpq's own message would quote it
    malformed = "durable job database URL is malformed"
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("mysql://u@h/db", {}, "durable job database URL must start with postgresql://"),
        (f"postgresql://u:{secret}@h/db", {}, malformed),
        (f"postgresql://u:{secret.replace(' ', '-')}@h/db?bogus_option=1", {}, malformed),
        ("postgresql://h/db", {"schema": "Bad-Name"}, "PostgreSQL schema names are"),
        ("postgresql://h/db", {"schema": "pg_catalog"}, "PostgreSQL schema names are"),
        ("postgresql://h/db", {"schema": "x" * 49}, "PostgreSQL schema names are"),
        ("postgresql://h/db", {"pool_min_size": 3, "pool_max_size": 2}, "pool_min_size must"),
        ("postgresql://h/db", {"pool_max_size": 0}, "pool_max_size must be between"),
        ("postgresql://h/db", {"connect_timeout_s": 0}, "connect_timeout_s must be between"),
        ("postgresql://h/db", {"busy_timeout_ms": -1}, "busy_timeout_ms must be between"),
        ("postgresql://h/db", {"max_result_bytes": -1}, "max_result_bytes must be"),
    ]
    for url, options, message in cases:
        with pytest.raises(BridgeError) as caught:
            await PostgresSharedJobStore.open(url, **options)
        assert caught.value.code is ErrorCode.INTERNAL
        assert caught.value.message.startswith(message), caught.value.message
        assert_secret_hidden(caught.value, secret)
        assert_secret_hidden(caught.value, secret.replace(" ", "-"))
