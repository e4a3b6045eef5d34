"""Kill -9 of a real bridge process mid-delivery: no webhook event is lost.

The bridge (``python -m imagebridge.server``, SQLite) delivers to a receiver in this test,
on 127.0.0.1, which verifies every request with ``openai``'s ``webhooks.unwrap``. The
process dies three ways: at the crash point after a receiver answered but before the
delivery was recorded (``IMAGEBRIDGE_TEST_CRASH_AT=webhook.delivery_sent``); killed by
the test while a receiver holds the request; killed while a job runs. After a restart on
the same data directory every event arrives: a claimed delivery comes back when its lease
runs out, with the same ``webhook-id`` and body (so the receiver de-duplicates it), and a
job the kill interrupted gets its ``job.interrupted`` event.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from imagebridge.engine.crash_points import CRASH_ENV
from tests.support.bridge_server import ServerProcess, database_problems, start_server
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import Receiver

SECRET = "whsec_" + "c2VjcmV0LWZvci10aGUtY3Jhc2gtdGVzdHMtMDEyMw=="  # 32 bytes
JOB: dict[str, Any] = {
    "operation": "generate",
    "prompt": "a crash-tested fox",
    "parameters": {"size": "16x16"},
}


def sets(receiver: Receiver) -> tuple[str, ...]:
    return (
        "server.webhooks.enabled=true",
        "server.webhooks.allow_private_networks=true",
        f"server.webhooks.allowed_ports=[{receiver.port}]",
        "server.webhooks.timeout_ms=1000",
        "server.webhooks.lease_secs=2",
        "server.webhooks.retry_initial_ms=100",
        "server.webhooks.retry_max_interval_ms=500",
        "server.webhooks.poll_interval_ms=50",
        f'server.webhooks.endpoints.hook.url="{receiver.url}"',
        'server.webhooks.endpoints.hook.secret_env="HOOK_SECRET"',
    )


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver(secret=SECRET)
    made.start()
    yield made
    made.stop()


def submit(server: ServerProcess, body: dict[str, Any] = JOB) -> str:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        answer = client.post("/v1/jobs", json=body)
    assert answer.status_code == 202, answer.text
    job_id: str = answer.json()["id"]
    return job_id


def status(server: ServerProcess, job_id: str) -> str:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        value: str = client.get(f"/v1/jobs/{job_id}").json()["status"]
    return value


def deliveries(server: ServerProcess) -> list[dict[str, Any]]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        data: list[dict[str, Any]] = client.get("/v1/webhook_deliveries").json()["data"]
    return data


def start(data: Path, receiver: Receiver, **env: str) -> ServerProcess:
    return start_server(data, *sets(receiver), env={"HOOK_SECRET": SECRET, **env})


def test_a_kill_after_the_receiver_answered_redelivers_the_same_message(
    tmp_path: Path, processes: list[ServerProcess], receiver: Receiver
) -> None:
    data = tmp_path / "data"
    doomed = start(data, receiver, **{CRASH_ENV: "webhook.delivery_sent"})
    processes.append(doomed)
    job = submit(doomed)
    assert doomed.wait_dead() == -9, "the process did not die after sending"
    [first] = receiver.snapshot()
    assert first.verified and first.event is not None and first.event["data"]["id"] == job

    server = start(data, receiver)
    processes.append(server)
    assert wait_until(lambda: [d["status"] for d in deliveries(server)] == ["delivered"])
    received = receiver.snapshot()
    assert [item.webhook_id for item in received] == [first.webhook_id] * 2
    assert {item.body for item in received} == {first.body}  # the same message, again
    assert all(item.verified for item in received)
    [delivery] = deliveries(server)
    assert (delivery["id"], delivery["attempts"]) == (first.webhook_id, 2)
    assert database_problems(data / "jobs.sqlite3") == []


def test_a_kill_while_the_receiver_holds_the_request_and_a_job_runs_loses_nothing(
    tmp_path: Path, processes: list[ServerProcess], receiver: Receiver
) -> None:
    receiver.answer = lambda number: (204, 4.0 if number == 0 else 0.0)
    data = tmp_path / "data"
    doomed = start(data, receiver)
    processes.append(doomed)
    finished = submit(doomed)
    assert wait_until(lambda: len(receiver.arrived) == 1)  # its event is in flight, held
    running = submit(doomed, {**JOB, "prompt": "[mock:latency=60000] a fox that never ends"})
    assert wait_until(lambda: status(doomed, running) == "running")
    doomed.kill()

    server = start(data, receiver)
    processes.append(server)
    assert wait_until(
        lambda: (
            len(receiver.accepted()) >= 2
            and all(d["status"] == "delivered" for d in deliveries(server))
        )
    )
    events = {e["data"]["id"]: e for e in receiver.accepted().values()}
    assert set(events) == {finished, running}
    assert events[finished]["type"] == "job.succeeded"
    assert events[running]["type"] == "job.interrupted"
    assert events[running]["data"]["error_code"] == "cancelled"
    assert all(item.verified for item in receiver.snapshot())
    assert len(deliveries(server)) == 2
