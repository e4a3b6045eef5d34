"""Soak: a mixed workload for N seconds, then nothing may be left behind.

The server runs as a child process (``tests.resilience.serve_debug``: the real app plus a
``/__debug/counts`` hook for its asyncio task count) with the mock provider at 150 ms and
partial images. Eight workers loop over a mix of synchronous requests, streams read to the
end, streams the client abandons mid-way, synchronous requests the client abandons,
upstream failures, jobs polled to success (and their artifacts fetched) and jobs
cancelled with ``DELETE`` while running. Every answer must be the expected one. Abandoned
synchronous work is kept (``on_disconnect: keep``): it finishes into the history.

Afterwards, once the server is idle again, compared with a baseline taken after a warm-up
round of the same mix: asyncio tasks back to the baseline (nothing orphaned by the
cancellations), file descriptors back near it, no child processes, no temporary files
in the data directory nor in the server's ``TMPDIR``, and RSS growth bounded
(``RSS_GROWTH_LIMIT``). Threads may grow only up to the default executor's fixed size — a
pool, not a leak.

Duration: 20 s by default; ``--soak-seconds N`` or ``IMAGEBRIDGE_SOAK_SECONDS=N`` for a
longer run.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from tests.resilience.harness import (
    TERMINAL_JOB_STATES,
    ProcessSample,
    ServerProcess,
    Table,
)

DEFAULT_SECONDS: Final = 20.0
WORKERS: Final = 8
LATENCY_MS: Final = 150
MiB: Final = 1024 * 1024
RSS_GROWTH_LIMIT: Final = 64 * MiB
FD_SLACK: Final = 4
TASK_SLACK: Final = 1
EXECUTOR_THREADS: Final = min(32, (os.cpu_count() or 1) + 4)
SMALL: Final = {"size": "64x64"}
TEMP_MARKERS: Final = (".imagegen-bridge-tmp-", ".part", ".tmp")

pytestmark = pytest.mark.slow


def soak_seconds(config: pytest.Config) -> float:
    option = config.getoption("--soak-seconds", default=None)
    if option is not None:
        return float(option)
    return float(os.environ.get("IMAGEBRIDGE_SOAK_SECONDS", DEFAULT_SECONDS))


def body(prompt: str = "a soak fox", **extra: Any) -> dict[str, Any]:
    return {"operation": "generate", "prompt": prompt, "parameters": dict(SMALL), **extra}


Action = Callable[[httpx.AsyncClient], Awaitable[str]]


async def sync_ok(client: httpx.AsyncClient) -> str:
    answer = await client.post("/v1/images", json=body())
    assert answer.status_code == 200, answer.text[:300]
    assert answer.json()["data"][0]["b64_json"]
    return "sync_ok"


async def sync_upstream_failure(client: httpx.AsyncClient) -> str:
    answer = await client.post("/v1/images", json=body("[mock:fail=upstream] soak"))
    assert answer.status_code == 502, answer.text[:300]
    assert answer.json()["error"]["imagegen_bridge"]["code"] == "upstream"
    return "sync_failure"


async def sync_abandoned(client: httpx.AsyncClient) -> str:
    request = asyncio.ensure_future(
        client.post("/v1/images", json=body("[mock:latency=3000] soak abandoned"))
    )
    await asyncio.sleep(random.uniform(0.05, 0.3))
    request.cancel()  # httpx closes the connection: the generation, begun, is kept
    try:
        await request
    except asyncio.CancelledError:
        return "sync_abandoned"
    return "sync_finished_anyway"


async def stream_ok(client: httpx.AsyncClient) -> str:
    events: list[str] = []
    request = body(parameters={**SMALL, "partial_images": 2})
    async with client.stream("POST", "/v1/images/stream", json=request) as answer:
        assert answer.status_code == 200
        async for line in answer.aiter_lines():
            if line.startswith("event: "):
                events.append(line[7:])
    assert events[0] == "started" and events[-1] == "completed", events
    return "stream_ok"


async def stream_abandoned(client: httpx.AsyncClient) -> str:
    request = body("[mock:latency=2000] soak stream", parameters={**SMALL, "partial_images": 3})
    async with client.stream("POST", "/v1/images/stream", json=request) as answer:
        assert answer.status_code == 200
        async for line in answer.aiter_lines():
            if line.startswith(("event: partial_image", "event: progress")):
                break  # leave mid-stream: closing the response drops the connection
    return "stream_abandoned"


async def _poll(client: httpx.AsyncClient, job_id: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}")).raise_for_status().json()
        if job["status"] in TERMINAL_JOB_STATES or time.monotonic() > deadline:
            return job
        await asyncio.sleep(0.05)


async def job_ok(client: httpx.AsyncClient) -> str:
    created = await client.post("/v1/jobs", json=body("soak job"))
    assert created.status_code == 202, created.text[:300]
    job = await _poll(client, created.json()["id"])
    assert job["status"] == "succeeded", job.get("error")
    artifact = job["result"]["data"][0]["id"]
    image = await client.get(f"/v1/artifacts/{artifact}")
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    return "job_ok"


async def job_cancelled(client: httpx.AsyncClient) -> str:
    created = await client.post("/v1/jobs", json=body("[mock:latency=3000] soak cancel"))
    assert created.status_code == 202, created.text[:300]
    job_id = created.json()["id"]
    await asyncio.sleep(random.uniform(0.0, 0.3))
    cancelled = await client.delete(f"/v1/jobs/{job_id}")
    assert cancelled.status_code == 200 and cancelled.json()["cancel_requested"] is True
    job = await _poll(client, job_id)
    assert job["status"] == "cancelled", job["status"]
    return "job_cancelled"


MIX: Final[list[Action]] = [
    sync_ok,
    sync_ok,
    sync_upstream_failure,
    sync_abandoned,
    stream_ok,
    stream_abandoned,
    job_ok,
    job_cancelled,
]


async def run_mix(url: str, seconds: float, seed: int) -> Counter[str]:
    """Every action once (in order), then random actions until ``seconds`` pass."""
    done: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=WORKERS * 2, keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        for action in MIX:
            done[await action(client)] += 1
        deadline = time.monotonic() + seconds
        rng = random.Random(seed)

        async def worker() -> None:
            while time.monotonic() < deadline:
                done[await rng.choice(MIX)(client)] += 1

        if seconds > 0:
            await asyncio.gather(*(worker() for _ in range(WORKERS)))
    return done


def counts(server: ServerProcess) -> dict[str, int]:
    answer = httpx.get(f"{server.url}/__debug/counts", timeout=10)
    return dict(answer.raise_for_status().json())


def idle(server: ServerProcess) -> bool:
    state = httpx.get(f"{server.url}/v1/diagnostics", timeout=10).raise_for_status().json()
    jobs = state.get("jobs") or {}
    runtime = state["runtime"]
    return (
        runtime["global_queued"] == 0
        and not any(runtime["providers_queued"].values())
        and jobs.get("running", 0) == 0
        and jobs.get("queued", 0) == 0
        and jobs.get("active_workers", 0) == 0
    )


def settle(server: ServerProcess, baseline_tasks: int, timeout: float = 15.0) -> dict[str, int]:
    """Wait (bounded) for the server to go idle and its task count to stop falling."""
    deadline = time.monotonic() + timeout
    now = counts(server)
    while time.monotonic() < deadline:
        if idle(server) and now["tasks"] <= baseline_tasks + TASK_SLACK:
            break
        time.sleep(0.1)
        now = counts(server)
    return now


def temp_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if any(m in path.name for m in TEMP_MARKERS)]


def test_soak_leaves_nothing_behind(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    seconds = soak_seconds(pytestconfig)
    sets = [f"providers.mock.latency_ms={LATENCY_MS}", "server.tracing.enabled=false"]
    # the server's own temporary directory: whatever it puts there must be gone afterwards
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with ServerProcess(
        tmp_path / "data",
        sets,
        module="tests.resilience.serve_debug",
        env={"TMPDIR": str(scratch)},
    ) as server:
        asyncio.run(run_mix(server.url, 0, seed=1))  # warm-up: every path once
        assert settle(server, baseline_tasks=10**6)
        base_counts = settle(server, baseline_tasks=counts(server)["tasks"])
        before: ProcessSample = server.sample()

        started = time.monotonic()
        done = asyncio.run(run_mix(server.url, seconds, seed=7))
        elapsed = time.monotonic() - started
        during = server.sample()

        # Abandoned work is kept (on_disconnect: keep, issue 39) and ends within its 2-3 s:
        # idle within 4 s proves it finished and left nothing behind.
        after_counts = settle(server, base_counts["tasks"], timeout=4.0)
        after = server.sample()
        leftovers = temp_files(server.data_dir) + sorted(scratch.iterdir())

    table = Table(["measure", "baseline", "after soak", "bound"])
    table.add("asyncio tasks", base_counts["tasks"], after_counts["tasks"], f"+{TASK_SLACK}")
    table.add("threads", before.threads, after.threads, f"+{EXECUTOR_THREADS}")
    table.add("file descriptors", before.fds, after.fds, f"+{FD_SLACK}")
    table.add("child processes", before.children, after.children, "0")
    table.add("RSS MiB", before.rss_bytes // MiB, after.rss_bytes // MiB, "+64")
    table.add("peak RSS MiB", before.peak_rss_bytes // MiB, during.peak_rss_bytes // MiB, "-")
    table.add("temp files", 0, len(leftovers), "0")
    operations = ", ".join(f"{name} {count}" for name, count in sorted(done.items()))
    table.publish(
        "soak.txt", f"Soak: {elapsed:.0f} s, {sum(done.values())} operations ({operations})"
    )

    assert sum(done.values()) > len(MIX), done
    assert done["sync_finished_anyway"] == 0, "an abandoned 3 s request finished anyway"
    assert after_counts["tasks"] <= base_counts["tasks"] + TASK_SLACK, (base_counts, after_counts)
    assert after.fds <= before.fds + FD_SLACK, (before, after)
    assert after.children == 0
    assert after.threads <= before.threads + EXECUTOR_THREADS, (before, after)
    assert after.rss_bytes - before.rss_bytes < RSS_GROWTH_LIMIT, (before, after)
    assert not leftovers, leftovers
