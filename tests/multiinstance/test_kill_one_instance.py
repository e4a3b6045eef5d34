"""Two bridge processes share one PostgreSQL database; one is ``kill -9``-ed mid-run.

Issue 14's acceptance test. Both processes run the mock provider with a latency that makes
jobs overlap, log every provider call to one shared file (``providers.mock.call_log``:
``<pid> <request id>`` per call, written before the call starts) and publish into one
shared artifact root. 50 jobs are submitted through both; once the first instance holds
leases on running jobs it is killed. Then:

* every job ends exactly once: ``succeeded``, or ``interrupted`` (with the recovery hint)
  for the jobs the killed instance was running — and only after their lease ran out;
* no job ran twice: at most one provider call per job, exactly one per succeeded job, and
  every interrupted job was leased by the killed instance, its call (if it got as far as
  calling the provider before the kill) from the killed process;
* both instances (the killed one restarted under its name) list the same history, and
  every result's artifact is served by both.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.multiinstance.bridges import (
    BridgeProcess,
    SharedDatabase,
    bridge_processes,
    start_bridge,
)
from tests.support.postgres import PostgresServer
from tests.support.waiting import wait_or_fail

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

JOBS = 50
# Long enough that the 8 slots (4 per instance) finish jobs slower than 50 submissions
# arrive, even on a loaded machine where submitting takes seconds: work must still be
# queued when the victim is killed (at 500 ms the queue could drain first).
LATENCY_MS = 1500
LEASE_SECS = 4
TERMINAL = {"succeeded", "failed", "cancelled", "interrupted"}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _submit(url: str, n: int) -> str:
    body = {
        "operation": "generate",
        "prompt": f"multi-instance fox {n}",
        "parameters": {"size": "16x16"},
    }
    response = httpx.post(f"{url}/v1/jobs", json=body, timeout=30)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


def _history(client: httpx.Client) -> dict[str, dict[str, Any]]:
    """Every job id → its summary, walking all pages."""
    jobs: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    for _ in range(JOBS):  # bounded: a page holds at least one job
        params: dict[str, Any] = {"limit": 100}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/jobs", params=params).json()
        jobs.update({item["id"]: item for item in page["items"]})
        cursor = page.get("next_cursor")
        if not cursor:
            break
    return jobs


def _calls(log: Path) -> list[tuple[int, str]]:
    """(pid, job id) per provider call."""
    calls = []
    for line in log.read_text().splitlines():
        pid, _, request_id = line.partition(" ")
        match = _UUID.search(request_id)
        assert match, line
        calls.append((int(pid), match.group(0)))
    return calls


def _lease_owners(database: SharedDatabase, job_ids: list[str]) -> dict[str, str | None]:
    """Job id → the instance that last held its lease, read from the shared database."""
    with psycopg.connect(database.url, password=database.password) as conn:
        rows = conn.execute(
            f"SELECT id, lease_owner FROM {database.schema}.image_jobs WHERE id = ANY(%s)",  # noqa: S608
            (job_ids,),
        ).fetchall()
    return {str(job_id): owner for job_id, owner in rows}


def _jobs_state(bridge: BridgeProcess) -> dict[str, Any]:
    state: dict[str, Any] = httpx.get(f"{bridge.url}/v1/diagnostics/extended", timeout=10).json()[
        "jobs"
    ]
    return state


def test_kill_9_of_one_instance_ends_every_job_exactly_once(
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
        "server.jobs.max_running=4",
    )
    with bridge_processes() as started:
        victim = start_bridge("inst-a", database, tmp_path / "a", *shared)
        started.append(victim)
        survivor = start_bridge("inst-b", database, tmp_path / "b", *shared)
        started.append(survivor)

        with ThreadPoolExecutor(max_workers=8) as pool:
            urls = [(victim if n % 2 else survivor).url for n in range(JOBS)]
            ids = list(pool.map(_submit, urls, range(JOBS)))
        assert len(set(ids)) == JOBS

        # Mid-run: the victim holds leases on running jobs and work remains queued.
        def victim_busy() -> bool:
            state = _jobs_state(survivor)
            return state["leases"].get("inst-a", 0) >= 2 and state["queued"] > 0

        wait_or_fail(victim_busy, 30, "the victim busy and work queued", interval=0.02)
        victim.kill()
        killed_at = time.time()

        with httpx.Client(base_url=survivor.url, timeout=30) as client:
            # Right after the kill its jobs still look alive: nobody takes them early.
            orphaned = _jobs_state(survivor)["leases"].get("inst-a", 0)
            assert orphaned >= 1

            def all_terminal() -> bool:
                history = _history(client)
                return len(history) == JOBS and all(
                    item["status"] in TERMINAL for item in history.values()
                )

            wait_or_fail(all_terminal, 120, "every job terminal", interval=0.2)
            final = {job_id: client.get(f"/v1/jobs/{job_id}").json() for job_id in ids}

        statuses = Counter(job["status"] for job in final.values())
        assert set(statuses) <= {"succeeded", "interrupted"}, statuses
        interrupted = [job for job in final.values() if job["status"] == "interrupted"]
        assert 1 <= len(interrupted) <= 4  # the victim's running jobs, no others
        for job in interrupted:
            assert job["error"]["code"] == "cancelled"
            assert job["error"]["details"]["recovery"] == "inspect_history_before_retrying"
            # Interrupted only once the lease (renewed every second until the kill, whole
            # seconds) had run out: at least LEASE_SECS - 2 seconds after the kill.
            assert job["completed"] >= int(killed_at) + LEASE_SECS - 2

        # No job ran twice; every succeeded job ran once; interrupted ones only on the victim.
        calls = _calls(call_log)
        per_job = Counter(job_id for _, job_id in calls)
        assert set(per_job) <= set(ids)
        assert max(per_job.values()) == 1, [job for job, n in per_job.items() if n > 1]
        assert all(
            per_job[job_id] == 1 for job_id, job in final.items() if job["status"] == "succeeded"
        )
        # The victim may die between claiming a job and calling the provider: such a job
        # is interrupted with no call at all. Either way only the victim had it.
        interrupted_ids = [job["id"] for job in interrupted]
        owners = _lease_owners(database, interrupted_ids)
        assert owners == dict.fromkeys(interrupted_ids, "inst-a"), owners
        by_job = {job_id: pid for pid, job_id in calls}
        assert all(by_job.get(job_id) in (victim.pid, None) for job_id in interrupted_ids)
        assert {pid for pid, _ in calls} <= {victim.pid, survivor.pid}

        # The killed instance comes back under its name: both list the same history, and
        # both serve every result's artifact from the shared root.
        revived = start_bridge("inst-a", database, tmp_path / "a", *shared)
        started.append(revived)
        with (
            httpx.Client(base_url=survivor.url, timeout=30) as via_b,
            httpx.Client(base_url=revived.url, timeout=30) as via_a,
        ):
            seen_b, seen_a = _history(via_b), _history(via_a)
            assert seen_a == seen_b
            assert sorted(seen_a) == sorted(ids)
            for job in final.values():
                if job["status"] == "succeeded":
                    artifact = job["result"]["data"][0]["id"]
                    assert via_a.get(f"/v1/artifacts/{artifact}").status_code == 200
                    assert via_b.get(f"/v1/artifacts/{artifact}").status_code == 200
        assert len(_calls(call_log)) == len(calls)  # the restart re-ran nothing
        assert victim.process.returncode == -9
