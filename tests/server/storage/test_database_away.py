"""A PostgreSQL jobs database that is away, or whose own disk is full, answers like a full
SQLite disk: 503, ``Retry-After`` and ``x-should-retry: true`` where nothing was written or
billed, so the OpenAI SDK at its default retries sends the request again; the provider never
runs meanwhile. The full disk shows in the storage health until a write succeeds."""

from __future__ import annotations

import httpx
import openai
import psycopg
import pytest

from tests.server.auth.keys import ADMIN, ENV, KEYS_ON, create_key
from tests.server.conftest import ServeFactory
from tests.server.doubles import mock_of
from tests.support.postgres_restart import RestartablePostgres
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

PASSWORD_ENV = "TEST_DB_AWAY_PASSWORD"
SUBMISSION = {"operation": "generate", "prompt": "a paper fox", "parameters": {"size": "16x16"}}


def test_a_stopped_database_is_a_503_the_sdk_retries_and_no_provider_runs(
    restartable_postgres_server: RestartablePostgres, serve: ServeFactory
) -> None:
    # restartable_postgres_server first: the bridge is stopped before its database at the end.
    server = serve(
        *KEYS_ON,
        f'server.jobs.database="{restartable_postgres_server.url(with_password=False)}"',
        f'server.jobs.postgres_password_env="{PASSWORD_ENV}"',
        "server.jobs.postgres_connect_timeout_ms=2000",
        env={**ENV, PASSWORD_ENV: restartable_postgres_server.password},
    )
    _, secret = create_key(server, "team", images_per_day=10)
    mock = mock_of(server)
    restartable_postgres_server.stop()
    before = mock.calls

    # A job submission: nothing was written, the same request may be sent again.
    with server.client(headers={"authorization": f"Bearer {ADMIN}"}) as client:
        refused = client.post("/v1/jobs", json=SUBMISSION, timeout=60)
    assert refused.status_code == 503, refused.text
    assert refused.headers["x-should-retry"] == "true"
    assert int(refused.headers["retry-after"]) >= 1
    error = refused.json()["error"]["imagegen_bridge"]
    assert error["retryable"] is True
    assert error["details"]["storage"] == "database"
    assert "commit" not in error["details"]

    # The OpenAI SDK on a key: the key's lookup needs the database, before any provider call.
    sent: list[str] = []
    with httpx.Client(event_hooks={"request": [lambda r: sent.append(r.url.path)]}) as http:
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key=secret, http_client=http)
        assert sdk.max_retries == 2  # the SDK's default
        with pytest.raises(openai.APIStatusError) as caught:
            sdk.images.generate(model="mock-image-1", prompt="a paper fox")
    assert caught.value.status_code == 503
    assert caught.value.response.headers["x-should-retry"] == "true"
    assert sent == ["/v1/images/generations"] * 3  # the first try and both retries
    assert mock.calls == before  # nothing ran upstream, nothing was billed

    # Back: once the pool has reconnected (readiness says so), the same request succeeds
    # without a restart of the bridge.
    restartable_postgres_server.start()
    with server.client(headers={"authorization": f"Bearer {ADMIN}"}) as client:
        assert wait_until(lambda: client.get("/health/ready").status_code == 200, 90, 0.2)
        again = client.post("/v1/jobs", json=SUBMISSION, timeout=60)
    assert again.status_code == 202, again.text


_DISK_FULL = """
CREATE FUNCTION "{schema}".disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = '53100';
END $$;
CREATE TRIGGER disk_full BEFORE INSERT ON "{schema}".image_jobs
  FOR EACH ROW EXECUTE FUNCTION "{schema}".disk_full();
"""


def test_the_databases_own_full_disk_is_named_and_shows_in_health(
    restartable_postgres_server: RestartablePostgres,
    serve: ServeFactory,
    postgres_schema: str,
    fresh_storage_health: None,
) -> None:
    """SQLSTATE 53100 from the real server (raised by a trigger: filling a real tablespace
    would need a volume of its own) answers and reports like SQLite's SQLITE_FULL."""
    server = serve(
        f'server.jobs.database="{restartable_postgres_server.url(with_password=False)}"',
        f'server.jobs.postgres_password_env="{PASSWORD_ENV}"',
        f'server.jobs.postgres_schema="{postgres_schema}"',
        env={PASSWORD_ENV: restartable_postgres_server.password},
    )
    with psycopg.connect(restartable_postgres_server.url(), autocommit=True) as conn:
        conn.execute(_DISK_FULL.format(schema=postgres_schema))  # type: ignore[arg-type]

    with server.client() as client:
        refused = client.post("/v1/jobs", json=SUBMISSION)
        ready = client.get("/health/ready")
        extended = client.get("/v1/diagnostics/extended").json()
        assert refused.status_code == 503, refused.text
        assert refused.headers["x-should-retry"] == "true"
        assert int(refused.headers["retry-after"]) >= 1
        error = refused.json()["error"]["imagegen_bridge"]
        assert error["retryable"] is True
        assert error["details"]["reason"] == "no_space"
        assert error["details"]["storage"] == "database"
        assert error["details"]["sqlstate"] == "53100"
        assert ready.status_code == 200  # reads are served
        assert ready.headers["x-imagebridge-storage"] == "degraded; database=no_space"
        assert extended["storage"]["areas"]["database"]["reason"] == "no_space"

        with psycopg.connect(restartable_postgres_server.url(), autocommit=True) as conn:
            conn.execute(f'DROP TRIGGER disk_full ON "{postgres_schema}".image_jobs')  # type: ignore[arg-type]
        # Space is back: the next write works and clears the fault, without a restart.
        assert client.post("/v1/jobs", json=SUBMISSION).status_code == 202
        assert "x-imagebridge-storage" not in client.get("/health/ready").headers
