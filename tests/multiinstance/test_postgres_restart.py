"""The shared PostgreSQL database restarts twice under two bridge instances (issue 33).

Two ``python -m imagebridge.server`` processes share a private PostgreSQL server
(:mod:`tests.support.postgres_restart`) and run 30 mock jobs whose provider calls are
logged to one file. Mid-run the database is stopped with a fast shutdown and started
again; later, with jobs still queued, its postmaster is ``kill -9``-ed and started again
(crash recovery). While it is away both instances say "not ready", a submission fails with
a retryable error and a synchronous request still completes; once it is back both
instances listen again (``LISTEN`` sessions in ``pg_stat_activity``) and ready again.
In the end every job ended exactly once: all 30 are in the history, each terminal, no
provider call ran twice, each succeeded job ran once, and the jobs queued at a restart ran
after it.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.multiinstance.bridges import (
    BridgeProcess,
    SharedDatabase,
    bridge_processes,
    start_bridge,
)
from tests.multiinstance.test_kill_one_instance import TERMINAL, _calls, _history
from tests.support.postgres_restart import RestartablePostgres
from tests.support.waiting import wait_or_fail

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(420)]

FIRST_BATCH = 20
SECOND_BATCH = 10
JOBS = FIRST_BATCH + SECOND_BATCH
LATENCY_MS = 2500
OUTAGE_S = 6.0
"""How long the database stays away: longer than a pooled call waits for a connection
(``postgres_connect_timeout_ms``), so calls in flight fail and jobs finish meanwhile."""
SCHEMA = "imagebridge"
RECOVERY = "inspect_history_before_retrying"


def _submit(url: str, n: int) -> str:
    """One job, submitted with an idempotency key (a retry cannot make a second job)."""
    body = {"operation": "generate", "prompt": f"restart fox {n}", "parameters": {"size": "16x16"}}
    key = str(uuid.uuid4())
    for _attempt in range(20):
        try:
            response = httpx.post(
                f"{url}/v1/jobs", json=body, headers={"Idempotency-Key": key}, timeout=30
            )
        except httpx.HTTPError:
            time.sleep(0.5)
            continue
        if response.status_code in (200, 202):
            job_id: str = response.json()["id"]
            return job_id
        time.sleep(0.5)
    pytest.fail(f"job {n} could not be submitted")


def _counts(server: RestartablePostgres) -> Counter[str]:
    with psycopg.connect(server.url(), connect_timeout=5) as conn:
        rows = conn.execute(
            f"SELECT status, COUNT(*) FROM {SCHEMA}.image_jobs GROUP BY status"  # noqa: S608
        ).fetchall()
    return Counter({str(status): int(count) for status, count in rows})


def _queued_ids(server: RestartablePostgres) -> set[str]:
    with psycopg.connect(server.url(), connect_timeout=5) as conn:
        rows = conn.execute(
            f"SELECT id FROM {SCHEMA}.image_jobs WHERE status = 'queued'"  # noqa: S608
        ).fetchall()
    return {str(row[0]) for row in rows}


def _listeners(server: RestartablePostgres) -> int:
    with psycopg.connect(server.url(), connect_timeout=5) as conn:
        value = conn.execute(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %%'"
        ).fetchone()
    assert value is not None
    return int(value[0])


def _ready(bridge: BridgeProcess) -> int:
    return httpx.get(f"{bridge.url}/health/ready", timeout=10).status_code


def _while_away(bridges: list[BridgeProcess], stopped: float) -> None:
    """The database is away: not ready, submissions refused retryably, sync work served;
    it stays away for :data:`OUTAGE_S` after ``stopped``."""
    for bridge in bridges:
        wait_or_fail(lambda b=bridge: _ready(b) == 503, 20, f"{bridge.name} not ready")
    refused = httpx.post(
        f"{bridges[0].url}/v1/jobs",
        json={"operation": "generate", "prompt": "refused", "parameters": {"size": "16x16"}},
        timeout=60,
    )
    assert refused.status_code >= 500, refused.text
    error = refused.json()["error"]["imagegen_bridge"]
    assert error["retryable"] is True and error["details"]["storage"] == "database"
    sync = httpx.post(
        f"{bridges[1].url}/v1/images",
        json={
            "operation": "generate",
            "prompt": "[mock:latency=1] sync while the database is away",
            "parameters": {"size": "16x16"},
        },
        timeout=60,
    )
    assert sync.status_code == 200, sync.text
    time.sleep(max(0.0, stopped + OUTAGE_S - time.monotonic()))  # the fault's length


def _submit_all(bridges: list[BridgeProcess], numbers: range) -> list[str]:
    """Jobs ``numbers``, alternately on each instance, all at once: submitted one by one on a
    busy machine they would trickle in no faster than they finish, and none would be queued
    when the database goes away."""
    with ThreadPoolExecutor(max_workers=len(numbers)) as pool:
        return list(pool.map(_submit, [bridges[n % 2].url for n in numbers], numbers))


def _back(server: RestartablePostgres, bridges: list[BridgeProcess]) -> None:
    """Both instances listen again and are ready again."""
    wait_or_fail(lambda: _listeners(server) == len(bridges), 60, "both LISTEN sessions back")
    for bridge in bridges:
        wait_or_fail(lambda b=bridge: _ready(b) == 200, 60, f"{bridge.name} ready again")


def test_two_database_restarts_during_30_jobs_end_every_job_exactly_once(
    restartable_postgres_server: RestartablePostgres, tmp_path: Path
) -> None:
    server = restartable_postgres_server
    database = SharedDatabase(
        url=server.url(with_password=False), schema=SCHEMA, password=server.password
    )
    call_log = tmp_path / "calls.log"
    shared = (
        f'artifacts.root="{tmp_path / "artifacts"}"',
        f'providers.mock.call_log="{call_log}"',
        f"providers.mock.latency_ms={LATENCY_MS}",
        "server.jobs.lease_secs=30",
        "server.jobs.heartbeat_secs=2",
        "server.jobs.poll_interval_ms=200",
        "server.jobs.max_running=3",
        "server.jobs.postgres_connect_timeout_ms=2000",
    )
    with bridge_processes() as bridges:
        bridges.append(start_bridge("inst-a", database, tmp_path / "a", *shared))
        bridges.append(start_bridge("inst-b", database, tmp_path / "b", *shared))
        for bridge in bridges:
            wait_or_fail(lambda b=bridge: _ready(b) == 200, 60, f"{bridge.name} ready")
        ids = _submit_all(bridges, range(FIRST_BATCH))
        wait_or_fail(lambda: _counts(server)["running"] >= 4, 60, "jobs running")

        # 1. Fast shutdown in the middle of the run, then the same server again.
        server.stop()
        _while_away(bridges, time.monotonic())
        server.start()
        _back(server, bridges)
        ids += _submit_all(bridges, range(FIRST_BATCH, JOBS))

        # 2. kill -9 of the postmaster while jobs are still queued; crash recovery.
        wait_or_fail(lambda: _counts(server)["running"] >= 4, 60, "jobs running again")
        queued_at_kill = _queued_ids(server)
        assert queued_at_kill, _counts(server)
        server.kill()
        _while_away(bridges, time.monotonic())
        server.start()
        _back(server, bridges)

        with httpx.Client(base_url=bridges[0].url, timeout=30) as client:

            def all_terminal() -> bool:
                history = _history(client)
                return len(history) == JOBS and all(
                    item["status"] in TERMINAL for item in history.values()
                )

            wait_or_fail(all_terminal, 180, "every job terminal", interval=0.5)
            final = {job_id: client.get(f"/v1/jobs/{job_id}").json() for job_id in ids}

    assert len(set(ids)) == JOBS
    statuses = Counter(job["status"] for job in final.values())
    assert set(statuses) <= {"succeeded", "interrupted"}, statuses
    for job in final.values():
        if job["status"] == "interrupted":
            assert job["error"]["details"]["recovery"] == RECOVERY
    every_call = [request_id for _, request_id in _calls(call_log)]
    calls = Counter(request_id for request_id in every_call if request_id in final)
    assert len(every_call) - calls.total() == 2  # the synchronous request of each outage
    assert max(calls.values()) == 1, [job_id for job_id, n in calls.items() if n > 1]
    for job_id, job in final.items():
        if job["status"] == "succeeded":
            assert calls[job_id] == 1
    # The jobs still queued when the database was killed ran after it came back.
    assert {final[job_id]["status"] for job_id in queued_at_kill} == {"succeeded"}
    # A restart shorter than the lease loses no running job: outcomes wait for the store.
    assert statuses["succeeded"] >= JOBS - 2, statuses
