"""The key-quota acceptance test of tests/server/auth/test_keys.py on the real PostgreSQL tier:
one bridge whose jobs database (and so its key store) is PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

from tests.server.auth.keys import ENV, KEYS_ON, burst, create_key
from tests.server.conftest import ServeFactory
from tests.server.doubles import mock_of
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

PASSWORD_ENV = "TEST_KEYS_PG_PASSWORD"


def test_forty_concurrent_requests_on_ten_images_a_day_on_postgres(
    serve: ServeFactory, postgres_server: PostgresServer, postgres_schema: str
) -> None:
    url = f"postgresql://bridge@{postgres_server.host}:{postgres_server.port}/imagebridge_test"
    server = serve(
        *KEYS_ON,
        f'server.jobs.database="{url}"',
        f'server.jobs.postgres_schema="{postgres_schema}"',
        f'server.jobs.postgres_password_env="{PASSWORD_ENV}"',
        env={**ENV, PASSWORD_ENV: postgres_server.password},
    )
    _, secret = create_key(server, "team", images_per_day=10)
    mock = mock_of(server)
    before = mock.calls

    responses = asyncio.run(burst(server, secret, 40))

    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 10 and statuses.count(429) == 30
    assert all("retry-after" in r.headers for r in responses if r.status_code == 429)
    assert mock.calls - before == 10
