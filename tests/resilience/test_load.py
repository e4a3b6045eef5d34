"""Load: 2 000 requests at concurrency 100 through ``/v1/images``, then finite admission.

The server is a child process (``python -m imagebridge.server`` on 127.0.0.1) so its RSS
can be read from ``/proc``; the mock provider answers every call after
``LATENCY_S`` (500 ms) with a small explicit size (64×64).

1. Unlimited admission, without a job history (the request path itself): zero errors;
   p99 of the client-side latency within ``P99_FACTOR`` (1.3) × the provider latency, i.e.
   the bridge adds at most 150 ms at the 99th percentile while ~200 requests/s flow
   through it; RSS growth over the post-warm-up baseline below ``RSS_GROWTH_LIMIT``
   (150 MiB). The machine is shared: when a round misses the latency bound a second round
   runs and the better one counts (a slower bridge misses both); every round must be
   error-free. Then the same with the history (the default): every request recorded and
   its image kept, no error, p99 within ``HISTORY_P99_RATIO`` × that of a bridge without
   a history measured just before it.
2. Finite admission (``runtime.global``: 10 running, 20 queued): a burst of 100
   concurrent clients. Whatever does not fit gets 503 ``overloaded`` (``details.limit``
   = ``global``) with ``Retry-After``, at once; nothing else fails; the admitted ones
   succeed; afterwards the queue is empty and normal traffic succeeds again.

The driver is :mod:`tests.resilience.loadgen`, a lean keep-alive HTTP/1.1 client in its own
process (one connection per worker): httpx in the pytest process cost milliseconds of
CPU per request plus the suite's garbage-collector pauses, which made the load generator,
not the bridge, the bottleneck on a 2-core machine. The 100 workers start
over one provider latency (a ramp, as load generators do) rather than in the same
millisecond: with a constant provider latency, a lockstep start would stay in lockstep
and measure the herd, not the bridge. Results are printed with ``-s`` and written to
``test-output/load.txt``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from tests.resilience.harness import REPO_ROOT, ServerProcess, Table, percentile
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

LATENCY_S: Final = 0.5
REQUESTS: Final = 2_000
CONCURRENCY: Final = 100
P99_FACTOR: Final = 1.3
HISTORY_P99_RATIO: Final = 3.0
ROUNDS: Final = 2
MiB: Final = 1024 * 1024
RSS_GROWTH_LIMIT: Final = 150 * MiB
WARMUP: Final = 50
ADMISSION_RUNNING: Final = 10
ADMISSION_QUEUED: Final = 20
BURST_REQUESTS: Final = 300
BODY: Final = {"operation": "generate", "prompt": "a load fox", "parameters": {"size": "64x64"}}
SETS: Final = (
    f"providers.mock.latency_ms={int(LATENCY_S * 1000)}",
    # one JSON log line per request is a deployment choice; measure the request path
    "server.tracing.enabled=false",
)


@dataclass(frozen=True, slots=True)
class Outcome:
    status: int | str
    seconds: float
    code: str | None = None
    limit: str | None = None
    retry_after: str | None = None


def drive(url: str, total: int, *, ramp_s: float) -> list[Outcome]:
    """``total`` requests from ``CONCURRENCY`` workers; every outcome, errors included.

    The generator runs in its own interpreter (:mod:`tests.resilience.loadgen`): the pytest
    process carries the whole suite's heap, and its pauses must not be measured as the
    bridge's latency.
    """
    command = [
        sys.executable,
        "-m",
        "tests.resilience.loadgen",
        url,
        str(total),
        str(CONCURRENCY),
        str(ramp_s),
        json.dumps(BODY),
    ]
    finished = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, check=True, timeout=600, text=True
    )
    return [
        Outcome(
            item["status"],
            item["seconds"],
            item.get("code"),
            item.get("limit"),
            item.get("retry_after"),
        )
        for item in json.loads(finished.stdout)
    ]


class RssSampler:
    """Samples the server's RSS every 100 ms in a thread; keeps the maximum."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.peak = server.sample().rss_bytes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self.server.sample().rss_bytes)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def diagnostics(server: ServerProcess) -> dict[str, Any]:
    answer = httpx.get(f"{server.url}/v1/diagnostics", timeout=10)
    return dict(answer.raise_for_status().json())


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[ServerProcess] = []

    def start(*extra: str) -> ServerProcess:
        server = ServerProcess(tmp_path / f"data-{len(started)}", [*SETS, *extra])
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@dataclass(frozen=True, slots=True)
class Round:
    outcomes: list[Outcome]
    wall: float

    @property
    def statuses(self) -> Counter[int | str]:
        return Counter(outcome.status for outcome in self.outcomes)

    def latency(self, q: float) -> float:
        return percentile([outcome.seconds for outcome in self.outcomes], q)


def _load(server: ServerProcess, bound: float, title: str) -> tuple[list[Round], float, float]:
    """Warm-up, then rounds of :data:`REQUESTS` (a second one only when the first misses
    ``bound`` on its p99); the rounds, the best p99 and the peak RSS growth."""
    drive(server.url, WARMUP, ramp_s=0)
    baseline = server.sample()
    rounds: list[Round] = []
    with RssSampler(server) as rss:
        # A second round only when the first misses the latency bound: the machine is
        # shared, and a regression in the bridge misses it both times (best of rounds,
        # as bench/multiinstance.py does). Errors and memory count in every round.
        while len(rounds) < ROUNDS and (not rounds or rounds[-1].latency(0.99) > bound):
            started = time.perf_counter()
            outcomes = drive(server.url, REQUESTS, ramp_s=LATENCY_S)
            rounds.append(Round(outcomes, time.perf_counter() - started))
    after = server.sample()

    best = min(rounds, key=lambda item: item.latency(0.99))
    p99 = best.latency(0.99)
    growth = rss.peak - baseline.rss_bytes
    table = Table(["measure", *(f"round {n}" for n in range(1, len(rounds) + 1)), "bound"])
    table.add("requests", *(len(r.outcomes) for r in rounds), REQUESTS)
    table.add("statuses", *(dict(r.statuses) for r in rounds), "{200: 2000}")
    table.add("throughput req/s", *(f"{len(r.outcomes) / r.wall:.0f}" for r in rounds), "-")
    table.add("latency p50 s", *(f"{r.latency(0.5):.3f}" for r in rounds), "-")
    table.add(
        "latency p99 s", *(f"{r.latency(0.99):.3f}" for r in rounds), f"<= {bound:.3f} (best)"
    )
    table.add("latency max s", *(f"{r.latency(1.0):.3f}" for r in rounds), "-")
    table.add(
        "p99 / provider latency",
        *(f"{r.latency(0.99) / LATENCY_S:.2f}" for r in rounds),
        f"<= {bound / LATENCY_S:.1f}",
    )
    blank = [""] * (len(rounds) - 1)
    table.add("RSS baseline MiB", baseline.rss_bytes // MiB, *blank, "-")
    table.add(
        "RSS growth (peak) MiB", f"{growth / MiB:.1f}", *blank, f"< {RSS_GROWTH_LIMIT // MiB}"
    )
    table.add("RSS after MiB", after.rss_bytes // MiB, *blank, "-")
    table.publish(f"load{title}.txt", f"Load: {REQUESTS} requests, concurrency {CONCURRENCY}")
    for round_ in rounds:
        assert len(round_.outcomes) == REQUESTS
        assert round_.statuses == {200: REQUESTS}, round_.statuses
    return rounds, p99, growth


@pytest.mark.serial  # its latency bound measures the machine: no other test may share it
def test_2000_requests_at_concurrency_100(server_factory: Any) -> None:
    """The request path itself, without a job history (``server.jobs.enabled = false``:
    nothing recorded, nothing kept): the bridge adds at most 150 ms at p99."""
    server: ServerProcess = server_factory("server.jobs.enabled=false")
    bound = P99_FACTOR * LATENCY_S
    rounds, p99, growth = _load(server, bound, "")
    assert p99 <= bound, f"p99 {p99:.3f} s in the best of {len(rounds)} rounds"
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew {growth / MiB:.1f} MiB"


@pytest.mark.serial  # its bound is a ratio of two runs on this machine: none may share it
def test_2000_requests_at_concurrency_100_each_recorded_and_kept(server_factory: Any) -> None:
    """The same load with the history (the default, issue 39): every request leaves a
    finished record and keeps its image (two SQLite commits and an artifact's fsyncs per
    request), nothing fails, memory stays bounded, and its p99 stays within
    ``HISTORY_P99_RATIO`` × the p99 of a bridge without a history measured in the same
    test (a ratio of one run: the machine is shared)."""
    bare: ServerProcess = server_factory("server.jobs.enabled=false")
    _, bare_p99, _ = _load(bare, P99_FACTOR * LATENCY_S, "-bare")
    bare.stop()
    server: ServerProcess = server_factory()
    bound = HISTORY_P99_RATIO * bare_p99
    rounds, p99, growth = _load(server, bound, "-history")
    assert p99 <= bound, f"p99 {p99:.3f} s against {bare_p99:.3f} s without a history"
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew {growth / MiB:.1f} MiB"
    expected = WARMUP + REQUESTS * len(rounds)
    wait_until(lambda: diagnostics(server)["jobs"]["succeeded"] >= expected, 60, 0.2)
    jobs = diagnostics(server)["jobs"]
    assert (jobs["succeeded"], jobs["running"], jobs["failed"]) == (expected, 0, 0), jobs


def test_finite_admission_sheds_the_excess_and_recovers(server_factory: Any) -> None:
    server: ServerProcess = server_factory(
        f"runtime.global.max_concurrent={ADMISSION_RUNNING}",
        f"runtime.global.max_queued={ADMISSION_QUEUED}",
    )
    drive(server.url, 10, ramp_s=0)

    burst = drive(server.url, BURST_REQUESTS, ramp_s=0)

    statuses = Counter(outcome.status for outcome in burst)
    shed = [outcome for outcome in burst if outcome.status != 200]
    table = Table(["measure", "value"])
    table.add("burst statuses", dict(statuses))
    table.add("shed codes", dict(Counter((o.code, o.limit) for o in shed)))
    table.add("shed Retry-After", dict(Counter(o.retry_after for o in shed)))
    if shed:
        table.add("shed latency p50 s", f"{percentile([o.seconds for o in shed], 0.5):.3f}")
    assert set(statuses) <= {200, 503, 429}, statuses
    assert statuses[200] >= ADMISSION_RUNNING + ADMISSION_QUEUED, statuses
    assert shed, "a burst of 100 over 30 places must shed some requests"
    for outcome in shed:
        assert outcome.code == "overloaded" and outcome.limit == "global", outcome
        assert outcome.retry_after is not None and int(outcome.retry_after) >= 1, outcome
    # shedding is immediate: a refused request waits neither in the queue nor for the
    # provider, so it is answered faster than any served one (which takes >= 500 ms)
    served = [outcome.seconds for outcome in burst if outcome.status == 200]
    assert percentile([o.seconds for o in shed], 0.5) < min(served)

    assert wait_until(lambda: diagnostics(server)["runtime"]["global_queued"] == 0, timeout=10)
    recovered = drive(server.url, 2 * ADMISSION_RUNNING, ramp_s=0)
    after = Counter(outcome.status for outcome in recovered)
    table.add("after the burst", dict(after))
    table.publish("load-admission.txt", "Finite admission: 10 running + 20 queued, burst of 100")
    # 100 workers again, but only 20 requests: the 10 + 20 places hold them all
    assert after == {200: 2 * ADMISSION_RUNNING}, after
    assert diagnostics(server)["runtime"]["global_queued"] == 0
