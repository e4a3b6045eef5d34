"""Two HTTP servers on one PostgreSQL database: one job history, any server answers.

Every server here runs in shared mode (``server.jobs.database`` is a ``postgresql://`` URL
without a password; the password comes from ``server.jobs.postgres_password_env``) and
publishes into one shared ``artifacts.root``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from imagebridge.config import BridgeConfig
from imagebridge.engine.provider import Provider
from imagebridge.providers.mock import MockProvider, MockSettings
from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_provider
from tests.support.postgres import PostgresServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.postgres

PASSWORD_ENV = "TEST_BRIDGE_PG_PASSWORD"
SLOW = "[mock:latency=20000]"


@pytest.fixture
def shared_sets(
    postgres_server: PostgresServer, postgres_schema: str, tmp_path: Path
) -> tuple[str, ...]:
    return (
        f'server.jobs.database="{postgres_server.bare_url()}"',
        f'server.jobs.postgres_schema="{postgres_schema}"',
        f'server.jobs.postgres_password_env="{PASSWORD_ENV}"',
        "server.jobs.postgres_pool_max_size=3",
        "server.jobs.poll_interval_ms=50",
        f'artifacts.root="{tmp_path / "shared-artifacts"}"',
    )


def start(
    serve: ServeFactory,
    postgres_server: PostgresServer,
    sets: tuple[str, ...],
    name: str,
    providers: Any = None,
) -> LiveServer:
    return serve(
        *sets,
        f'server.jobs.instance_id="{name}"',
        providers=providers,
        env={PASSWORD_ENV: postgres_server.password},
    )


def submit(client: httpx.Client, prompt: str, **routing: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "operation": "generate",
        "prompt": prompt,
        "parameters": {"size": "16x16"},
    }
    if routing:
        body["routing"] = routing
    response = client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    return job


def settled(client: httpx.Client, job_id: str) -> dict[str, Any]:
    latest: dict[str, Any] = {}

    def terminal() -> bool:
        latest.update(client.get(f"/v1/jobs/{job_id}").json())
        return latest["status"] not in ("queued", "running")

    assert wait_until(terminal, timeout=20, interval=0.02)
    return latest


def with_alpha(config: BridgeConfig) -> list[Provider]:
    return [mock_provider(config), MockProvider(MockSettings(name="alpha"))]


def test_any_server_shows_the_history_and_serves_the_artifacts(
    serve: ServeFactory, postgres_server: PostgresServer, shared_sets: tuple[str, ...]
) -> None:
    a = start(serve, postgres_server, shared_sets, "node-a")
    b = start(serve, postgres_server, shared_sets, "node-b")
    with a.client() as via_a, b.client() as via_b:
        jobs = [submit(via_a if n % 2 else via_b, f"fox {n}")["id"] for n in range(6)]
        for job_id in jobs:
            done = settled(via_b, job_id)
            assert done["status"] == "succeeded"
            artifact = done["result"]["data"][0]["id"]
            for client in (via_a, via_b):  # published once, readable everywhere
                image = client.get(f"/v1/artifacts/{artifact}")
                assert image.status_code == 200
                assert image.headers["content-type"] == "image/png"
        for client in (via_a, via_b):
            listed = client.get("/v1/jobs", params={"limit": 100}).json()
            assert sorted(item["id"] for item in listed["items"]) == sorted(jobs)
        diagnostics = [client.get("/v1/diagnostics/extended") for client in (via_a, via_b)]
    for response, name in zip(diagnostics, ("node-a", "node-b"), strict=True):
        assert response.status_code == 200
        jobs_state = response.json()["jobs"]
        assert (jobs_state["shared"], jobs_state["instance_id"]) == (True, name)
        assert jobs_state["leases"] == {} and jobs_state["queued_by_provider"] == {}
        assert jobs_state["succeeded"] == 6
        assert postgres_server.password not in response.text
        assert "postgresql://" not in response.text


def test_a_cancel_sent_to_one_server_stops_the_job_on_another(
    serve: ServeFactory, postgres_server: PostgresServer, shared_sets: tuple[str, ...]
) -> None:
    runner = start(serve, postgres_server, shared_sets, "runner", providers=with_alpha)
    front = start(serve, postgres_server, shared_sets, "front")
    with runner.client() as via_runner, front.client() as via_front:
        job = submit(via_front, SLOW, provider="alpha")  # only the runner serves alpha

        def running() -> bool:
            state = via_front.get(f"/v1/jobs/{job['id']}").json()
            return bool(state["status"] == "running" and state["progress"]["stage"] != "starting")

        assert wait_until(running, timeout=10)
        diagnostics = via_front.get("/v1/diagnostics/extended").json()["jobs"]
        assert diagnostics["leases"] == {"runner": 1}
        cancelled = via_front.delete(f"/v1/jobs/{job['id']}")
        assert cancelled.status_code == 200 and cancelled.json()["cancel_requested"] is True
        done = settled(via_runner, job["id"])
    assert done["status"] == "cancelled" and done["error"]["code"] == "cancelled"
    alpha = next(
        p
        for p in runner.state.application.providers
        if isinstance(p, MockProvider) and p.name == "alpha"
    )
    assert alpha.cancellations == 1


def test_a_missing_password_variable_refuses_to_start(
    postgres_server: PostgresServer, postgres_schema: str, tmp_path: Path
) -> None:
    sets = [
        'default_provider="mock"',
        "providers.codex_responses.enabled=false",
        "providers.codex_app_server.enabled=false",
        f'server.jobs.database="{postgres_server.bare_url()}"',
        f'server.jobs.postgres_schema="{postgres_schema}"',
        f'server.jobs.postgres_password_env="{PASSWORD_ENV}"',
    ]
    args = [sys.executable, "-m", "imagebridge.server", "--bind", "127.0.0.1:0"]
    for item in sets:
        args += ["--set", item]
    env = {
        "IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stderr.strip().splitlines()[-1])
    assert error["code"] == "configuration"
    assert error["details"]["field"] == "server.jobs.postgres_password_env"
