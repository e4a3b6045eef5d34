"""Shared-mode scaling: durable jobs per second with two bridge instances vs one.

A throwaway PostgreSQL server (the test suite's, on 127.0.0.1) holds the jobs. For each
configuration — one instance, then two, alternating for ``ROUNDS`` rounds — real bridge
processes (``python -m imagebridge.server``, zero-latency mock provider, 64×64 images,
default job settings) start on a fresh schema of the same database, ``JOBS`` jobs are
submitted through them round-robin by ``CONCURRENCY`` client tasks, and the clock stops
when the database shows every job finished. Each configuration keeps its best round (the
machine is shared and noisy). It prints

    multiinstance.two_over_one <jobs/s with two instances / jobs/s with one> report

plus comment lines with the absolute figures and the machine's CPU count: both instances,
PostgreSQL and this client share the machine, so with a zero-latency provider the ratio is
bounded by its cores. ``--latency-ms N`` gives the mock a latency instead (provider-bound
jobs, as with a real image model). Every count and wait is bounded; the default run takes
about a minute on a small machine.

Run from the repository root: ``.venv/bin/python bench/multiinstance.py [--latency-ms N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.multiinstance.bridges import (  # noqa: E402 - needs the repository root on the path
    SharedDatabase,
    bridge_processes,
    start_bridge,
)
from tests.support.postgres import find_postgres_bin, running_postgres  # noqa: E402

REQUEST = {
    "operation": "generate",
    "prompt": "benchmark shared fox",
    "parameters": {"size": "64x64"},
}
WARMUP = 10
JOBS = 200
ROUNDS = 2
CONCURRENCY = 16
DONE_TIMEOUT_S = 120.0


async def _submit_all(urls: list[str], count: int) -> None:
    """``count`` submissions spread round-robin over ``urls`` by ``CONCURRENCY`` tasks."""
    numbers = iter(range(count))

    async def worker(client: httpx.AsyncClient) -> None:
        for n in numbers:
            response = await client.post(f"{urls[n % len(urls)]}/v1/jobs", json=REQUEST)
            response.raise_for_status()

    async with httpx.AsyncClient(timeout=60) as client:
        await asyncio.gather(*(worker(client) for _ in range(CONCURRENCY)))


def _finished(admin_url: str, schema: str) -> int:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{schema}".image_jobs '  # noqa: S608 - generated name
            "WHERE status IN ('succeeded', 'failed', 'cancelled', 'interrupted')"
        ).fetchone()
    return int(row[0]) if row else 0


def _wait_finished(admin_url: str, schema: str, count: int) -> None:
    deadline = time.monotonic() + DONE_TIMEOUT_S
    while _finished(admin_url, schema) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"jobs did not finish within {DONE_TIMEOUT_S:.0f} s")
        time.sleep(0.02)


def _measure(
    instances: int, database: SharedDatabase, admin_url: str, scratch: Path, latency_ms: int
) -> float:
    """Jobs per second for ``instances`` bridges on a fresh schema."""
    with bridge_processes() as started:
        for n in range(instances):
            data_dir = scratch / f"{database.schema}-{n}"
            latency = f"providers.mock.latency_ms={latency_ms}"
            started.append(start_bridge(f"bench-{n}", database, data_dir, latency))
        urls = [bridge.url for bridge in started]
        asyncio.run(_submit_all(urls, WARMUP))
        _wait_finished(admin_url, database.schema, WARMUP)
        began = time.perf_counter()
        asyncio.run(_submit_all(urls, JOBS))
        _wait_finished(admin_url, database.schema, WARMUP + JOBS)
        elapsed = time.perf_counter() - began
        failed = WARMUP + JOBS - _succeeded(admin_url, database.schema)
    if failed:
        raise RuntimeError(f"{failed} benchmark jobs did not succeed")
    return JOBS / elapsed


def _succeeded(admin_url: str, schema: str) -> int:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM \"{schema}\".image_jobs WHERE status = 'succeeded'"  # noqa: S608
        ).fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench/multiinstance.py")
    parser.add_argument("--latency-ms", type=int, default=0, help="mock provider latency")
    latency_ms = max(0, parser.parse_args().latency_ms)
    bin_dir = find_postgres_bin()
    if bin_dir is None:
        print("# PostgreSQL is not installed (scripts/install-test-deps installs it)")
        sys.exit(2)
    started = time.monotonic()
    with running_postgres(bin_dir) as server, tempfile.TemporaryDirectory() as scratch:
        bare = f"postgresql://bridge@{server.host}:{server.port}/imagebridge_test"
        rates: dict[int, float] = {1: 0.0, 2: 0.0}
        for _ in range(ROUNDS):
            for instances in (1, 2):
                schema = f"bench_{uuid.uuid4().hex[:12]}"
                database = SharedDatabase(url=bare, schema=schema, password=server.password)
                rate = _measure(instances, database, server.url(), Path(scratch), latency_ms)
                rates[instances] = max(rates[instances], rate)
    print(f"# one instance: {rates[1]:.1f} jobs/s; two instances: {rates[2]:.1f} jobs/s")
    print(f"# mock latency {latency_ms} ms; {JOBS} jobs per round, best of {ROUNDS} rounds;")
    print(f"# {os.cpu_count()} CPUs shared by the bridges, PostgreSQL and this client;")
    print(f"# run took {time.monotonic() - started:.1f} s")
    print(f"multiinstance.two_over_one {rates[2] / rates[1]:.2f} report")


if __name__ == "__main__":
    main()
