"""Issue 31: a key's ``max_concurrent`` holds across two bridge processes on one
PostgreSQL database, and a killed instance's slots come back after their lease.

The slots are counted in the database (docs/keys.md), so two instances together run at
most ``max_concurrent`` requests of a key upstream. Measured through the shared mock call
log (a line written as each provider call starts): a watcher notes when each line
appears; with a mock latency of ``LATENCY_MS`` and 2 slots, any 3 calls in a row start at
least one latency apart (a third one starting sooner would be a third at once).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.multiinstance.bridges import (
    BridgeProcess,
    SharedDatabase,
    bridge_processes,
    start_bridge,
)
from tests.support.postgres import PostgresServer

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

ADMIN_ENV = "MULTI_INSTANCE_ADMIN_TOKEN"
ADMIN = "multi-admin-SECRET-8"
LATENCY_MS = 1000
# How late the watcher may note a line on a loaded machine (it polls every 10 ms).
NOTICE_SLACK_S = 0.3
LEASE_SECS = 6


def _body(prompt: str = "a fox", timeout_ms: int = 60_000) -> dict[str, Any]:
    return {
        "operation": "generate",
        "prompt": prompt,
        "parameters": {"size": "16x16"},
        "timeout_ms": timeout_ms,
    }


def _post(url: str, secret: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"authorization": f"Bearer {secret}"}
    return httpx.post(f"{url}/v1/images", json=body, headers=headers, timeout=120)


@contextmanager
def _watch(log: Path) -> Iterator[list[float]]:
    """Monotonic times at which each line of ``log`` was first seen."""
    seen: list[float] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            count = len(log.read_text().splitlines()) if log.exists() else 0
            now = time.monotonic()
            seen.extend([now] * (count - len(seen)))
            stop.wait(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(timeout=10)


def _wait_lines(log: Path, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not log.exists() or len(log.read_text().splitlines()) < count:
        assert time.monotonic() < deadline, "the provider calls did not start"
        time.sleep(0.02)


def _start_pair(
    started: list[BridgeProcess], database: SharedDatabase, tmp_path: Path, call_log: Path
) -> tuple[BridgeProcess, BridgeProcess]:
    shared = (
        f'artifacts.root="{tmp_path / "artifacts"}"',
        f'providers.mock.call_log="{call_log}"',
        f"providers.mock.latency_ms={LATENCY_MS}",
        "server.keys.enabled=true",
        f"server.keys.slot_lease_secs={LEASE_SECS}",
        "server.keys.slot_poll_max_ms=100",
        f'server.bearer_token_env="{ADMIN_ENV}"',
    )
    first = start_bridge("slots-a", database, tmp_path / "a", *shared)
    started.append(first)
    second = start_bridge("slots-b", database, tmp_path / "b", *shared)
    started.append(second)
    return first, second


def test_max_concurrent_holds_across_instances_and_a_killed_ones_slots_come_back(
    postgres_server: PostgresServer,
    postgres_schema: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ADMIN_ENV, ADMIN)
    database = SharedDatabase.on(postgres_server, postgres_schema)
    call_log = tmp_path / "calls.log"
    with bridge_processes() as started:
        first, second = _start_pair(started, database, tmp_path, call_log)
        created = httpx.post(
            f"{first.url}/v1/keys",
            json={"name": "pair", "max_concurrent": 2},
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=30,
        )
        assert created.status_code == 201, created.text
        secret = created.json()["secret"]

        # 6 slow requests at once, 3 through each instance.
        urls = [(first if n % 2 else second).url for n in range(6)]
        with _watch(call_log) as seen, ThreadPoolExecutor(max_workers=6) as pool:
            began = time.monotonic()
            responses = list(pool.map(_post, urls, [secret] * 6, [_body()] * 6))
            took = time.monotonic() - began
        assert [r.status_code for r in responses] == [200] * 6, [r.text for r in responses]
        assert len(seen) == 6
        latency = LATENCY_MS / 1000
        for earlier, later in zip(seen, seen[2:], strict=False):
            assert later - earlier >= latency - NOTICE_SLACK_S, seen  # never 3 at once
        assert took >= 3 * latency - NOTICE_SLACK_S  # three rounds of two

        # The first instance dies holding both slots (two calls hanging upstream).
        hanging = _body("[mock:latency=60000] a stuck fox")
        with ThreadPoolExecutor(max_workers=2) as pool:
            for _ in range(2):
                pool.submit(_post, first.url, secret, hanging)
            _wait_lines(call_log, 8)
            first.kill()
            killed_at = time.monotonic()
            # The slots are still leased to the dead instance: a short deadline runs out.
            refused = _post(second.url, secret, _body(timeout_ms=1000))
            assert time.monotonic() - killed_at < LEASE_SECS / 3 * 2, "lease ran out first"
            assert refused.status_code == 429, refused.text
            details = refused.json()["error"]["imagegen_bridge"]["details"]
            assert details["reason"] == "key_concurrency"
            assert int(refused.headers["retry-after"]) >= 1
            # Once the lease runs out both slots come back: two requests run, in time.
            back = list(pool.map(_post, [second.url] * 2, [secret] * 2, [_body()] * 2))
        assert [r.status_code for r in back] == [200, 200], [r.text for r in back]
        assert time.monotonic() - killed_at < LEASE_SECS + 30
