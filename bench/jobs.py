"""Durable-jobs throughput: jobs finished per second vs synchronous requests per second.

One real bridge process (``python -m imagebridge.server`` on 127.0.0.1, default job
settings, zero-latency mock provider, 64×64 images) serves both sides of the ratio in the
same run:

* **jobs**: each of ``CONCURRENCY`` client tasks submits ``POST /v1/jobs`` and polls
  ``GET /v1/jobs/{id}`` every ``POLL_INTERVAL_S`` until the job is terminal, then starts
  the next one; throughput is finished jobs per second of wall time;
* **sync**: the same tasks send ``POST /v1/images`` with the same body.

Rounds alternate (sync, jobs, sync, jobs) so drift on a busy machine hits both sides.
It prints

    jobs.throughput_ratio <jobs per second / sync requests per second> report

plus comment lines with the absolute figures. Every count is bounded; the run takes well
under a minute.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time

import httpx

from _server import ServerProcess  # bench/ is on sys.path when a benchmark runs

REQUEST = {
    "operation": "generate",
    "prompt": "benchmark durable fox",
    "parameters": {"size": "64x64"},
}
BRIDGE_SETS = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
    "providers.codex_images.enabled=false",
    "providers.mock.latency_ms=0",
]
CONCURRENCY = 8
PER_ROUND = 120
ROUNDS = 2
WARMUP = 16
POLL_INTERVAL_S = 0.005
JOB_TIMEOUT_S = 60.0
TERMINAL = {"succeeded", "failed", "cancelled", "interrupted"}


async def _one_job(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/jobs", json=REQUEST)
    if created.status_code != 202:
        raise RuntimeError(f"job submission answered {created.status_code}")
    job_id = created.json()["id"]
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        await asyncio.sleep(POLL_INTERVAL_S)
        detail = await client.get(f"/v1/jobs/{job_id}")
        detail.raise_for_status()
        status = detail.json()["status"]
        if status in TERMINAL:
            if status != "succeeded":
                raise RuntimeError(f"benchmark job ended {status}")
            return
        if time.monotonic() > deadline:
            raise RuntimeError("benchmark job did not finish in time")


async def _one_image(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/images", json=REQUEST)
    response.raise_for_status()


async def _round(client: httpx.AsyncClient, kind: str, total: int) -> float:
    """Run ``total`` operations on ``CONCURRENCY`` tasks; returns the wall time in seconds."""
    operation = _one_job if kind == "jobs" else _one_image
    pending = iter(range(total))

    async def worker() -> None:
        for _ in pending:
            await operation(client)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - started


async def _measure(url: str) -> dict[str, float]:
    limits = httpx.Limits(max_connections=CONCURRENCY * 2, max_keepalive_connections=32)
    elapsed = {"sync": 0.0, "jobs": 0.0}
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        for kind in elapsed:
            await _round(client, kind, WARMUP)
        for _ in range(ROUNDS):
            for kind in elapsed:
                elapsed[kind] += await _round(client, kind, PER_ROUND)
    done = PER_ROUND * ROUNDS
    return {kind: done / seconds for kind, seconds in elapsed.items()}


def main() -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEGEN_BRIDGE")}
        env["IMAGEGEN_BRIDGE_DATA_DIR"] = scratch
        args = ["-m", "imagebridge.server", "--bind", "127.0.0.1:0"]
        for item in BRIDGE_SETS:
            args += ["--set", item]
        bridge = ServerProcess(args, env)
        try:
            rates = asyncio.run(_measure(bridge.url()))
        finally:
            bridge.stop()
    print(
        f"# concurrency {CONCURRENCY}, {PER_ROUND * ROUNDS} of each, poll every "
        f"{POLL_INTERVAL_S * 1000:.0f} ms; jobs {rates['jobs']:.1f}/s, "
        f"sync {rates['sync']:.1f}/s; run took {time.monotonic() - started:.1f} s"
    )
    print(f"jobs.throughput_ratio {rates['jobs'] / rates['sync']:.2f} report")


if __name__ == "__main__":
    main()
