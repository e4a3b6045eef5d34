"""A served bridge whose PostgreSQL database is unreachable at startup (issue 33, item 2).

It waits, retrying with backoff, up to ``server.jobs.postgres_startup_wait_ms``: when the
database never comes it exits non-zero with a clear message (before announcing a URL);
when the database comes up within the wait, it starts serving; a SIGTERM meanwhile ends the
wait and the process (exit 0).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.multiinstance.bridges import PASSWORD_ENV, SharedDatabase
from tests.server.lifecycle.process import MOCK_ONLY, Process
from tests.support.postgres import find_postgres_bin
from tests.support.postgres_restart import restartable_postgres

pytestmark = pytest.mark.timeout(180)


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens there once closed


def test_an_unreachable_database_is_waited_for_then_the_start_fails_clearly(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGEGEN_BRIDGE", "PG"))}
    env["IMAGEGEN_BRIDGE_DATA_DIR"] = str(tmp_path)
    sets = [
        *MOCK_ONLY,
        f'server.jobs.database="postgresql://bridge@127.0.0.1:{_closed_port()}/none"',
        "server.jobs.postgres_startup_wait_ms=2500",
        "server.jobs.poll_interval_ms=100",
        "server.jobs.heartbeat_secs=1",
        "server.jobs.lease_secs=2",
    ]
    args = [sys.executable, "-m", "imagebridge.server", "--bind", "127.0.0.1:0"]
    for item in sets:
        args += ["--set", item]
    started = time.monotonic()
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=False)
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-2000:]
    assert "listening on" not in done.stderr
    assert elapsed >= 2.5  # it waited for the database first
    assert done.stderr.count("jobs database unreachable at startup; waiting") >= 3  # backoff
    error = json.loads(done.stderr.strip().splitlines()[-1])
    assert "unreachable for 2.5 s at startup" in error["message"]
    assert error["details"]["field"] == "server.jobs.database"
    assert error["details"]["attempts"] >= 3
    assert error["retryable"] is True


def test_a_stop_signal_ends_the_wait_for_the_database(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGEGEN_BRIDGE", "PG"))}
    env["IMAGEGEN_BRIDGE_DATA_DIR"] = str(tmp_path)
    args = ["--bind", "127.0.0.1:0"]
    for item in (
        *MOCK_ONLY,
        f'server.jobs.database="postgresql://bridge@127.0.0.1:{_closed_port()}/none"',
        "server.jobs.postgres_startup_wait_ms=600000",
        "server.jobs.poll_interval_ms=100",
        "server.jobs.heartbeat_secs=5",
        "server.jobs.lease_secs=10",
    ):
        args += ["--set", item]
    process = Process(args, tmp_path, env)
    try:
        process.wait_line("jobs database unreachable at startup; waiting", timeout=60)
        signalled = time.monotonic()
        process.popen.send_signal(signal.SIGTERM)
        assert process.popen.wait(timeout=30) == 0
        assert time.monotonic() - signalled < 8  # not the 10 min wait, nor grace + settle
    finally:
        if process.popen.poll() is None:
            process.popen.kill()
            process.popen.wait(timeout=10)
    assert not any("listening on" in line for line in process.drain())


@pytest.mark.postgres
def test_a_database_that_comes_up_during_the_wait_is_used(tmp_path: Path) -> None:
    bin_dir = find_postgres_bin()
    if bin_dir is None:
        pytest.skip(
            "PostgreSQL is not installed (no initdb/postgres under /usr/lib/postgresql/*/bin "
            "or on PATH); run scripts/install-test-deps"
        )
    with restartable_postgres(bin_dir) as server:
        server.stop()
        database = SharedDatabase(
            url=server.url(with_password=False), schema="imagebridge", password=server.password
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGEGEN_BRIDGE", "PG"))}
        env.update({"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path), PASSWORD_ENV: server.password})
        args = ["--bind", "127.0.0.1:0"]
        for item in (
            *MOCK_ONLY,
            *database.sets(),
            "server.jobs.postgres_startup_wait_ms=60000",
            "server.jobs.poll_interval_ms=200",
            "server.jobs.heartbeat_secs=1",
            "server.jobs.lease_secs=2",
        ):
            args += ["--set", item]
        process = Process(args, tmp_path, env)
        try:
            process.wait_line("jobs database unreachable at startup; waiting", timeout=60)
            server.start()
            url = process.wait_line(r"listening on (http://127\.0\.0\.1:\d+)", timeout=60)
            body = {"operation": "generate", "prompt": "late", "parameters": {"size": "16x16"}}
            response = httpx.post(f"{url.group(1)}/v1/jobs", json=body, timeout=30)
            assert response.status_code == 202, response.text
            process.popen.send_signal(signal.SIGTERM)
            assert process.popen.wait(timeout=30) == 0
        finally:
            if process.popen.poll() is None:
                process.popen.kill()
                process.popen.wait(timeout=10)
