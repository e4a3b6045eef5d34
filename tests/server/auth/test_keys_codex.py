"""A key's reservation against the Codex backend mock: a definite failure gives the image
back, an unknown outcome (the mock stalls, or drops the connection mid-stream, after the
request was sent: it may have been billed) keeps it (docs/keys.md, quota rules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.auth.keys import ENV, KEYS_ON, admin, as_key, create_key
from tests.server.conftest import ServeFactory
from tests.support.codex_backend import (
    CodexBackend,
    bridge_sets,
    codex_responses_sets,
    write_codex_auth,
)
from tests.support.jobs_api import finished_job

BODY = {"operation": "generate", "prompt": "a red fox", "timeout_ms": 3000}


@pytest.mark.parametrize(
    ("behaviour", "kept"),
    [("http_400", False), ("stall", True), ("disconnect_mid_stream", True)],
)
def test_a_failure_gives_back_and_an_unknown_outcome_keeps_the_reservation(
    serve: ServeFactory,
    codex_backend: CodexBackend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    behaviour: str,
    kept: bool,
) -> None:
    server = serve(*KEYS_ON, *codex_responses_sets(codex_backend, tmp_path, monkeypatch), env=ENV)
    _, secret = create_key(server, "kim", images_per_day=3)
    codex_backend.set_default(behaviour)
    with as_key(server, secret) as client:
        answer = client.post("/v1/images", json=BODY)
    assert answer.status_code >= 400
    error = answer.json()["error"]["imagegen_bridge"]
    assert (error.get("details", {}).get("outcome") == "unknown") is kept
    assert codex_backend.calls("responses") >= 1  # it was sent upstream
    remaining = answer.headers["x-imagebridge-images-remaining-day"]
    assert remaining == ("2" if kept else "3")
    with admin(server) as client:
        (row,) = client.get("/v1/usage").json()["data"]
    assert (row["requested"], row["failed"], row["unknown"]) == ((1, 0, 1) if kept else (1, 1, 0))


def test_a_success_is_counted_on_the_pool_account_it_ran_on(
    serve: ServeFactory, codex_backend: CodexBackend, tmp_path: Path
) -> None:
    tokens = {"alpha": "tok-alpha-SECRET-1f0c", "beta": "tok-beta-SECRET-2a9d"}
    pool = []
    for name, token in tokens.items():
        home = tmp_path / f"home-{name}"
        write_codex_auth(home, access_token=token, account_id=f"acct-{name}-SECRET-77")
        pool.append(f'accounts.pool.{name}.codex_home="{home}"')
    sets = [s for s in bridge_sets(codex_backend, tmp_path) if not s.startswith("inputs.")]
    server = serve(
        *KEYS_ON,
        *sets,
        *pool,
        "providers.codex_responses.enabled=true",
        'default_provider="codex-responses"',
        env=ENV,
    )
    _, secret = create_key(server, "kim", images_per_day=10)
    with as_key(server, secret) as client:
        # n = 2 fans out one call per account; n = 1 then runs on one of them, and a job
        # of the key on one of them too.
        first = client.post("/v1/images", json={**BODY, "parameters": {"n": 2}})
        second = client.post("/v1/images", json=BODY)
        job = client.post("/v1/jobs", json=BODY)
        assert job.status_code in (200, 201, 202), job.text
        assert finished_job(client, job.json()["id"])["status"] == "succeeded"
    assert first.status_code == 200, first.text
    assert second.status_code == 200, second.text
    ran = {name: codex_backend.calls_by(token) for name, token in tokens.items()}
    assert sum(ran.values()) == 4 and min(ran.values()) >= 1
    assert "account" not in first.json()  # the original's response shape is kept
    with admin(server) as client:
        rows = client.get("/v1/usage").json()["data"]
        alpha = client.get("/v1/usage", params={"account": "alpha"}).json()["data"]
    by_account = {row["account"]: (row["requested"], row["delivered"]) for row in rows}
    assert by_account == {name: (count, count) for name, count in ran.items()}
    assert [row["account"] for row in alpha] == ["alpha"]
