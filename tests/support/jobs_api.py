"""Waiting for a durable job over the HTTP API, the way a caller does: poll
``GET /v1/jobs/{id}`` until it leaves ``queued`` / ``running``."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.waiting import STATE_S, wait_until

UNFINISHED = ("queued", "running")


def finished_job(
    client: httpx.Client, job_id: str, timeout: float = STATE_S, interval: float = 0.05
) -> dict[str, Any]:
    """The job once it has finished, or its last state when ``timeout`` (a hang guard)
    passes first: the caller's assertion on its status says what went wrong."""
    job: dict[str, Any] = {}

    def finished() -> bool:
        answer = client.get(f"/v1/jobs/{job_id}")
        assert answer.status_code == 200, answer.text
        job.clear()
        job.update(answer.json())
        return job["status"] not in UNFINISHED

    wait_until(finished, timeout, interval)
    return job
