"""Scaling: 1, 2, 4 and 8 bridge instances on one PostgreSQL database and one S3 store.

A throwaway PostgreSQL server and a private Ceph RADOS Gateway (``scripts/s3-server``), both
as the test suite starts them, on 127.0.0.1. For each instance count ``k``, real bridge
processes (``python -m imagebridge.server``) start on a fresh schema and key prefix, as a
team runs them: named API keys on (every request looks its key up, reserves and settles
its images in the database), artifacts on S3, the mock provider with a latency
(``--latency-ms``, 4 s by default: slow like an image model, so the bridge's CPU is not the
limit), ``server.jobs.max_running`` slots each. Then, as one key:

* **jobs**: ``k × max_running × WAVES`` jobs submitted round-robin, the clock stopped when
  the database shows them all finished: jobs/s, and the queue wait of each (``started_at
  − created_at``, whole seconds as the store keeps them);
* **claim latency**: ``PROBES`` single jobs on idle instances (zero provider latency), each
  timed from its submission's answer until the database shows it claimed (polled every
  ``PROBE_POLL_S``): how long LISTEN/NOTIFY and the claim take;
* **synchronous**: ``k × max_running`` clients send ``POST /v1/images`` (artifact output,
  so every image goes to S3) for ``SYNC_S`` seconds (at least three provider latencies):
  requests/s.

Meanwhile it samples ``pg_stat_activity`` (the bridges' connections: peak, per instance,
listening) and the CPU time of the bridges, PostgreSQL, Ceph, this client and the whole
machine (``/proc``), so the numbers say what the machine was doing. It prints

    scaling.jobs.<k>_over_1   <jobs/s with k instances / jobs/s with 1>   (>= 3.5 at 4, >= 6 at 8)
    scaling.sync.<k>_over_1   <requests/s with k / with 1>                report

and ``#`` notes with every absolute figure. Run from the repository root:
``.venv/bin/python bench/scaling.py [--latency-ms N] [--counts 1,2,4,8] [--waves N]``
(``bench/run.py scaling``; not part of the default run: it takes several minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.multiinstance.bridges import (  # noqa: E402 - needs the repository root on the path
    BridgeProcess,
    SharedDatabase,
    bridge_processes,
    start_bridge,
)
from tests.support.postgres import (  # noqa: E402
    PostgresServer,
    find_postgres_bin,
    running_postgres,
)
from tests.support.s3 import S3Server, missing_s3_programs, running_s3_server  # noqa: E402

ADMIN_ENV = "BENCH_SCALING_ADMIN"
ADMIN = "bench-scaling-admin-" + uuid.uuid4().hex
S3_KEY_ENV = "BENCH_SCALING_S3_KEY"
S3_SECRET_ENV = "BENCH_SCALING_S3_SECRET"
WAVES = 3
PROBES = 20
PROBE_POLL_S = 0.005
SYNC_S = 12.0
SAMPLE_S = 0.25
SUBMITTERS = 16
DONE_TIMEOUT_S = 600.0
TARGETS = {4: ">= 3.5", 8: ">= 6"}
TERMINAL = ("succeeded", "failed", "cancelled", "interrupted")
_TICK = os.sysconf("SC_CLK_TCK")


def _body(prompt: str, output: str) -> dict[str, object]:
    return {
        "operation": "generate",
        "prompt": prompt,
        "parameters": {"size": "64x64"},
        "output": {"response_format": output},
    }


JOB = _body("a scaled fox", "artifact")
PROBE = _body("[mock:latency=0] a probing fox", "artifact")
SYNC = _body("a synchronous fox", "artifact")


# -- CPU and connections ------------------------------------------------------------------


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one live process; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def _matching(text: str) -> list[int]:
    """Processes whose command line mentions ``text`` (the Ceph daemons of one cluster)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if text in command:
            found.append(int(entry.name))
    return found


def _machine_busy() -> tuple[float, float]:
    """``(busy, total)`` CPU seconds of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    return (total - idle) / _TICK, total / _TICK


@dataclass
class Usage:
    """CPU seconds by party over one phase, and the database connections seen."""

    cpu: dict[str, float] = field(default_factory=dict)
    connections: list[int] = field(default_factory=list)
    active: list[int] = field(default_factory=list)
    listening: int = 0
    loadavg: tuple[float, float] = (0.0, 0.0)
    seconds: float = 0.0


class Meter:
    """Samples CPU of each party and the bridges' connections while a phase runs."""

    def __init__(
        self, bridges: Sequence[BridgeProcess], postgres: PostgresServer, s3: S3Server
    ) -> None:
        self._parties = {
            "bridges": [bridge.pid for bridge in bridges],
            "postgres": [postgres.pid, *_children(postgres.pid)],
            "ceph": _matching(str(s3.directory)),
            "client": [os.getpid()],
        }
        self._admin = postgres.admin_url()

    def _cpu(self) -> dict[str, float]:
        cpu = {
            party: sum(_process_cpu(pid) for pid in pids) for party, pids in self._parties.items()
        }
        cpu["machine"] = _machine_busy()[0]
        return cpu

    @contextmanager
    def phase(self) -> Iterator[Usage]:
        usage = Usage()
        stop = threading.Event()
        load_before = os.getloadavg()[0]

        def sample() -> None:
            with psycopg.connect(self._admin, autocommit=True) as conn:
                while not stop.is_set():
                    row = conn.execute(
                        "SELECT count(*), count(*) FILTER (WHERE state = 'active'),"
                        " count(*) FILTER (WHERE query ILIKE 'LISTEN%%')"
                        " FROM pg_stat_activity WHERE usename = 'bridge'"
                    ).fetchone()
                    if row is not None:
                        usage.connections.append(int(row[0]))
                        usage.active.append(int(row[1]))
                        usage.listening = max(usage.listening, int(row[2]))
                    stop.wait(SAMPLE_S)

        # Postgres forks a backend per connection: re-read its children at the end too.
        before = self._cpu()
        started = time.monotonic()
        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield usage
        finally:
            stop.set()
            thread.join(timeout=10)
            usage.seconds = time.monotonic() - started
            self._parties["postgres"] = sorted(
                {*self._parties["postgres"], *_children(self._parties["postgres"][0])}
            )
            after = self._cpu()
            usage.cpu = {party: max(0.0, after[party] - before.get(party, 0.0)) for party in after}
            usage.loadavg = (load_before, os.getloadavg()[0])


# -- one configuration --------------------------------------------------------------------


@dataclass
class Result:
    instances: int
    jobs_per_s: float = 0.0
    sync_per_s: float = 0.0
    queue_wait_s: list[int] = field(default_factory=list)
    claim_ms: list[float] = field(default_factory=list)
    jobs_usage: Usage = field(default_factory=Usage)
    sync_usage: Usage = field(default_factory=Usage)
    jobs: int = 0
    sync_requests: int = 0
    failures: int = 0


def _sets(s3: S3Server, prefix: str, latency_ms: int, max_running: int) -> list[str]:
    return [
        "server.keys.enabled=true",
        f'server.bearer_token_env="{ADMIN_ENV}"',
        f"providers.mock.latency_ms={latency_ms}",
        f"server.jobs.max_running={max_running}",
        "server.jobs.max_pending=100000",
        'artifacts.backend="s3"',
        f'artifacts.s3.endpoint="{s3.endpoint}"',
        f'artifacts.s3.region="{s3.region}"',
        f'artifacts.s3.bucket="{s3.bucket}"',
        f'artifacts.s3.key_prefix="{prefix}"',
        'artifacts.s3.addressing_style="path"',
        f'artifacts.s3.access_key_id_env="{S3_KEY_ENV}"',
        f'artifacts.s3.secret_access_key_env="{S3_SECRET_ENV}"',
    ]


def _start_all(
    count: int, database: SharedDatabase, scratch: Path, sets: list[str], env: dict[str, str]
) -> list[BridgeProcess]:
    def one(n: int) -> BridgeProcess:
        data_dir = scratch / f"{database.schema}-{n}"
        return start_bridge(f"scale-{n}", database, data_dir, *sets, timeout=120, env=env)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def _create_key(url: str) -> str:
    with httpx.Client(timeout=60) as client:
        response = client.post(
            f"{url}/v1/keys",
            json={"name": "bench", "images_per_day": 10_000_000},
            headers={"authorization": f"Bearer {ADMIN}"},
        )
    response.raise_for_status()
    return str(response.json()["secret"])


async def _submit(urls: list[str], secret: str, count: int) -> list[str]:
    """``count`` jobs spread round-robin over ``urls``; their ids."""
    numbers = iter(range(count))
    ids: list[str] = []
    auth = {"authorization": f"Bearer {secret}"}

    async def worker(client: httpx.AsyncClient) -> None:
        for n in numbers:
            response = await client.post(f"{urls[n % len(urls)]}/v1/jobs", json=JOB, headers=auth)
            response.raise_for_status()
            ids.append(response.json()["id"])

    limits = httpx.Limits(max_connections=SUBMITTERS)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(SUBMITTERS)))
    return ids


def _finished(conn: psycopg.Connection[tuple[int]], schema: str, ids: list[str]) -> int:
    row = conn.execute(
        f'SELECT count(*) FROM "{schema}".image_jobs '  # noqa: S608 - generated name
        "WHERE id = ANY(%s) AND status = ANY(%s)",
        (ids, list(TERMINAL)),
    ).fetchone()
    return int(row[0]) if row else 0


def _wait_done(admin: str, schema: str, ids: list[str]) -> None:
    deadline = time.monotonic() + DONE_TIMEOUT_S
    with psycopg.connect(admin, autocommit=True) as conn:
        while _finished(conn, schema, ids) < len(ids):
            if time.monotonic() > deadline:
                raise RuntimeError(f"jobs did not finish within {DONE_TIMEOUT_S:.0f} s")
            time.sleep(0.02)


def _jobs_phase(
    result: Result, urls: list[str], secret: str, count: int, admin: str, schema: str
) -> None:
    began = time.perf_counter()
    ids = asyncio.run(_submit(urls, secret, count))
    _wait_done(admin, schema, ids)
    elapsed = time.perf_counter() - began
    with psycopg.connect(admin, autocommit=True) as conn:
        rows = conn.execute(
            f'SELECT status, started_at - created_at FROM "{schema}".image_jobs '  # noqa: S608
            "WHERE id = ANY(%s)",
            (ids,),
        ).fetchall()
    result.jobs = count
    result.jobs_per_s = count / elapsed
    result.failures += sum(1 for status, _ in rows if status != "succeeded")
    result.queue_wait_s = sorted(wait for _, wait in rows if isinstance(wait, int))


def _probe_claims(result: Result, urls: list[str], secret: str, admin: str, schema: str) -> None:
    """Single jobs on idle instances: submission answered → claimed, polled in the store."""
    auth = {"authorization": f"Bearer {secret}"}
    with httpx.Client(timeout=60) as client, psycopg.connect(admin, autocommit=True) as conn:
        for n in range(PROBES):
            response = client.post(f"{urls[n % len(urls)]}/v1/jobs", json=PROBE, headers=auth)
            response.raise_for_status()
            answered = time.perf_counter()
            job_id = response.json()["id"]
            deadline = time.monotonic() + 30
            while True:
                row = conn.execute(
                    f'SELECT status FROM "{schema}".image_jobs WHERE id = %s',  # noqa: S608
                    (job_id,),
                ).fetchone()
                if row is not None and row[0] != "queued":
                    result.claim_ms.append((time.perf_counter() - answered) * 1000)
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("a probe job was not claimed within 30 s")
                time.sleep(PROBE_POLL_S)
            while _finished(conn, schema, [job_id]) < 1:  # idle again before the next
                time.sleep(0.01)


async def _sync_load(urls: list[str], secret: str, clients: int, seconds: float) -> tuple[int, int]:
    """Closed loop: ``clients`` requests in flight, round-robin, for ``seconds``."""
    auth = {"authorization": f"Bearer {secret}"}
    done = failed = 0
    counter = itertools.count()
    loop = asyncio.get_running_loop()
    stop = loop.time() + seconds

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal done, failed
        while loop.time() < stop:
            url = urls[next(counter) % len(urls)]
            response = await client.post(f"{url}/v1/images", json=SYNC, headers=auth)
            if response.status_code == 200:
                done += 1
            else:
                failed += 1

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(clients)))
    return done, failed


def _measure(
    count: int,
    postgres: PostgresServer,
    s3: S3Server,
    scratch: Path,
    *,
    latency_ms: int,
    max_running: int,
    waves: int,
) -> Result:
    schema = f"scale_{uuid.uuid4().hex[:12]}"
    bare = f"postgresql://bridge@{postgres.host}:{postgres.port}/imagebridge_test"
    database = SharedDatabase(url=bare, schema=schema, password=postgres.password)
    env = {
        ADMIN_ENV: ADMIN,
        S3_KEY_ENV: s3.access_key_id,
        S3_SECRET_ENV: s3.secret_access_key,
    }
    sets = _sets(s3, f"scale-{schema}/", latency_ms, max_running)
    result = Result(count)
    with bridge_processes() as started:
        started.extend(_start_all(count, database, scratch, sets, env))
        urls = [bridge.url for bridge in started]
        secret = _create_key(urls[0])
        meter = Meter(started, postgres, s3)
        warm = asyncio.run(_submit(urls, secret, count))  # warm-up: each instance runs one
        _wait_done(postgres.admin_url(), schema, warm)  # idle slots when the clock starts
        with meter.phase() as result.jobs_usage:
            _jobs_phase(
                result, urls, secret, count * max_running * waves, postgres.admin_url(), schema
            )
        _probe_claims(result, urls, secret, postgres.admin_url(), schema)
        with meter.phase() as result.sync_usage:
            seconds = max(SYNC_S, 3 * latency_ms / 1000)  # several requests per client
            done, failed = asyncio.run(_sync_load(urls, secret, count * max_running, seconds))
        result.sync_requests = done
        result.failures += failed
        result.sync_per_s = done / result.sync_usage.seconds
    return result


# -- report -------------------------------------------------------------------------------


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _notes(result: Result, latency_ms: int, max_running: int) -> list[str]:
    k = result.instances
    jobs, sync = result.jobs_usage, result.sync_usage
    ideal = k * max_running / (latency_ms / 1000)
    cpu = jobs.cpu
    per_job = {party: cpu.get(party, 0.0) / max(1, result.jobs) * 1000 for party in cpu}
    ours = sum(cpu.get(p, 0.0) for p in ("bridges", "postgres", "ceph", "client"))
    other = max(0.0, cpu.get("machine", 0.0) - ours)
    claim = result.claim_ms
    waits = result.queue_wait_s
    return [
        f"k={k}: jobs {result.jobs_per_s:.2f}/s ({result.jobs_per_s / ideal:.0%} of the "
        f"{ideal:.2f}/s the slots allow), sync {result.sync_per_s:.2f}/s; "
        f"{result.failures} failed",
        f"k={k}: claim latency (idle, ms) p50 {_percentile(claim, 0.5):.0f} "
        f"p95 {_percentile(claim, 0.95):.0f} p99 {_percentile(claim, 0.99):.0f} max "
        f"{max(claim, default=0):.0f}; queue wait under load (s) p50 "
        f"{_percentile(waits, 0.5):.0f} p95 {_percentile(waits, 0.95):.0f}",
        f"k={k}: database connections of the bridges peak {max(jobs.connections, default=0)} "
        f"({max(jobs.connections, default=0) / k:.1f} per instance), mean "
        f"{statistics.fmean(jobs.connections) if jobs.connections else 0:.1f}, active peak "
        f"{max(jobs.active, default=0)}, listening {jobs.listening}",
        f"k={k}: CPU over the jobs phase ({jobs.seconds:.1f} s): bridges "
        f"{cpu.get('bridges', 0):.1f} s ({per_job.get('bridges', 0):.0f} ms/job), postgres "
        f"{cpu.get('postgres', 0):.1f} s ({per_job.get('postgres', 0):.0f} ms/job), ceph "
        f"{cpu.get('ceph', 0):.1f} s ({per_job.get('ceph', 0):.0f} ms/job), client "
        f"{cpu.get('client', 0):.1f} s; machine busy {cpu.get('machine', 0) / jobs.seconds:.2f}"
        f" of {os.cpu_count()} cores, of which others' {other / jobs.seconds:.2f}; load "
        f"{jobs.loadavg[0]:.1f} → {jobs.loadavg[1]:.1f}",
        f"k={k}: CPU over the sync phase ({sync.seconds:.1f} s): bridges "
        f"{sync.cpu.get('bridges', 0):.1f} s ("
        f"{sync.cpu.get('bridges', 0) / max(1, result.sync_requests) * 1000:.0f} ms/request), "
        f"machine busy {sync.cpu.get('machine', 0) / max(sync.seconds, 1e-9):.2f} cores; "
        f"connections peak {max(sync.connections, default=0)}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench/scaling.py")
    parser.add_argument("--latency-ms", type=int, default=4000, help="mock provider latency")
    parser.add_argument("--counts", default="1,2,4,8", help="instance counts (1 first)")
    parser.add_argument("--waves", type=int, default=WAVES, help="job backlog in slot rounds")
    parser.add_argument("--max-running", type=int, default=4, help="server.jobs.max_running")
    args = parser.parse_args()
    # A stop signal unwinds like Ctrl-C, so the bridges, PostgreSQL and Ceph are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    counts = sorted({int(part) for part in args.counts.split(",")})
    if counts[0] != 1:
        counts.insert(0, 1)
    bin_dir = find_postgres_bin()
    missing = missing_s3_programs()
    if bin_dir is None or missing:
        why = "PostgreSQL" if bin_dir is None else f"Ceph ({missing})"
        print(f"# {why} is not installed (scripts/install-test-deps installs it)")
        sys.exit(2)
    started = time.monotonic()
    load = os.getloadavg()
    results: dict[int, Result] = {}
    with (
        running_postgres(bin_dir) as postgres,
        running_s3_server() as s3,
        tempfile.TemporaryDirectory() as scratch,
    ):
        for count in counts:
            results[count] = _measure(
                count,
                postgres,
                s3,
                Path(scratch),
                latency_ms=args.latency_ms,
                max_running=args.max_running,
                waves=args.waves,
            )
            for note in _notes(results[count], args.latency_ms, args.max_running):
                print(f"# {note}", flush=True)
    one = results[1]
    print(
        f"# mock latency {args.latency_ms} ms, max_running {args.max_running}, backlog "
        f"{args.waves} waves; keys on, artifacts on S3 (Ceph), PostgreSQL "
        f"max_connections 200; {os.cpu_count()} CPUs shared by everything here and others"
    )
    print(
        f"# load average at start {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}, at end "
        f"{'/'.join(f'{v:.1f}' for v in os.getloadavg())}; run took "
        f"{time.monotonic() - started:.0f} s"
    )
    for count in counts[1:]:
        result = results[count]
        target = TARGETS.get(count, "report")
        print(f"scaling.jobs.{count}_over_1 {result.jobs_per_s / one.jobs_per_s:.2f} {target}")
        print(f"scaling.sync.{count}_over_1 {result.sync_per_s / one.sync_per_s:.2f} report")


if __name__ == "__main__":
    main()
