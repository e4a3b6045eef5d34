"""SIGTERM to one of two bridge instances sharing PostgreSQL (issue 33, item 4).

The stopped instance gets a grace shorter than its running jobs: it must claim nothing
more (the other instance takes the whole queue), record its own running jobs
``interrupted`` with the recovery hint at once (not leave them to lease expiry, 30 s
here), and exit 0. Every job ends exactly once and no provider call runs twice.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.multiinstance.bridges import SharedDatabase, bridge_processes, start_bridge
from tests.multiinstance.test_kill_one_instance import TERMINAL, _calls, _history, _submit
from tests.support.postgres import PostgresServer
from tests.support.waiting import wait_or_fail

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

JOBS = 16
LATENCY_MS = 3000
LEASE_SECS = 30
GRACE_MS = 500
RECOVERY = "inspect_history_before_retrying"


def _rows(database: SharedDatabase) -> dict[str, tuple[str, str | None]]:
    """Job id → (status, last lease owner), read from the shared database."""
    with psycopg.connect(database.url, password=database.password) as conn:
        rows = conn.execute(
            f"SELECT id, status, lease_owner FROM {database.schema}.image_jobs"  # noqa: S608
        ).fetchall()
    return {str(job_id): (str(status), owner) for job_id, status, owner in rows}


def test_sigterm_of_one_instance_hands_the_queue_to_the_other(
    postgres_server: PostgresServer, postgres_schema: str, tmp_path: Path
) -> None:
    database = SharedDatabase.on(postgres_server, postgres_schema)
    call_log = tmp_path / "calls.log"
    shared = (
        f'artifacts.root="{tmp_path / "artifacts"}"',
        f'providers.mock.call_log="{call_log}"',
        f"providers.mock.latency_ms={LATENCY_MS}",
        f"server.jobs.lease_secs={LEASE_SECS}",
        "server.jobs.heartbeat_secs=1",
        "server.jobs.poll_interval_ms=100",
        "server.jobs.max_running=3",
    )
    with bridge_processes() as started:
        stopping = start_bridge(
            "inst-a", database, tmp_path / "a", *shared, f"server.shutdown_grace_ms={GRACE_MS}"
        )
        started.append(stopping)
        staying = start_bridge("inst-b", database, tmp_path / "b", *shared)
        started.append(staying)
        # All at once: submitted one by one on a busy machine, the jobs would trickle in no
        # faster than they finish, and neither instance would ever hold two of them.
        with ThreadPoolExecutor(max_workers=JOBS) as pool:
            urls = [(stopping if n % 2 else staying).url for n in range(JOBS)]
            ids = list(pool.map(_submit, urls, range(JOBS)))

        def both_busy() -> bool:
            owners = Counter(
                owner for status, owner in _rows(database).values() if status == "running"
            )
            return owners["inst-a"] >= 2 and owners["inst-b"] >= 2

        wait_or_fail(both_busy, 60, "both instances running jobs")
        signalled = time.time()
        stopping.process.send_signal(signal.SIGTERM)
        code = stopping.process.wait(timeout=30)
        at_exit = _rows(database)

        with httpx.Client(base_url=staying.url, timeout=30) as client:

            def all_terminal() -> bool:
                history = _history(client)
                return len(history) == JOBS and all(
                    item["status"] in TERMINAL for item in history.values()
                )

            wait_or_fail(all_terminal, 120, "every job terminal", interval=0.2)
            final = {job_id: client.get(f"/v1/jobs/{job_id}").json() for job_id in ids}

    assert code == 0
    # At its exit, the stopped instance had settled its own jobs: none left running.
    assert not [
        job for job, (status, owner) in at_exit.items() if owner == "inst-a" and status == "running"
    ]
    statuses = Counter(job["status"] for job in final.values())
    assert set(statuses) <= {"succeeded", "interrupted"}, statuses
    owners = {job_id: owner for job_id, (_, owner) in _rows(database).items()}
    for job_id, job in final.items():
        if job["status"] == "interrupted":
            assert owners[job_id] == "inst-a"  # only the stopped instance's jobs
            assert job["error"]["details"]["recovery"] == RECOVERY
            assert job["completed"] < signalled + LEASE_SECS - 5  # recorded by it, at once
    assert statuses["interrupted"] >= 1  # its running jobs outlived the short grace
    # The queue went to the other instance: every job still queued at the exit ran there.
    queued_at_exit = [job_id for job_id, (status, _) in at_exit.items() if status == "queued"]
    assert queued_at_exit
    for job_id in queued_at_exit:
        assert final[job_id]["status"] == "succeeded"
        assert owners[job_id] == "inst-b"
    calls = Counter(request_id for _, request_id in _calls(call_log))
    assert max(calls.values()) == 1
    for job_id, job in final.items():
        if job["status"] == "succeeded":
            assert calls[job_id] == 1
