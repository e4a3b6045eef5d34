"""SIGTERM to a real served process (issue 33, item 4): drain, finish, interrupt, exit 0.

The bridge runs as ``python -m imagebridge.server`` on SQLite with the mock provider, whose
per-prompt latency makes work outlive the signal. The first SIGTERM must refuse new
requests (503 with ``Retry-After``, readiness not ready) while the streams and jobs in
flight go on; streams finish within ``server.shutdown_grace_ms``; jobs end ``succeeded``
or ``interrupted`` with the recovery hint (none left ``running``); the process exits 0 and
leaves no temporary or partial file. A second SIGTERM exits at once (128 + 15), also
without a half-written file, and the next start records the abandoned jobs interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from imagebridge.artifacts.filesystem.objects import TEMP_PREFIX
from tests.server.lifecycle.process import MOCK_ONLY, Process
from tests.support.waiting import STARTUP_S, STATE_S, wait_or_fail

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

GRACE_MS = 12_000
SETTLE_MS = 5_000
RECOVERY = "inspect_history_before_retrying"


def _start(data: Path, *sets: str) -> tuple[Process, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEGEN_BRIDGE")}
    env["IMAGEGEN_BRIDGE_DATA_DIR"] = str(data)
    args = ["--bind", "127.0.0.1:0"]
    for item in (
        *MOCK_ONLY,
        "server.tracing.enabled=false",
        "server.jobs.max_running=10",
        f"server.shutdown_grace_ms={GRACE_MS}",
        f"server.shutdown_settle_ms={SETTLE_MS}",
        *sets,
    ):
        args += ["--set", item]
    process = Process(args, data.parent, env)
    url = process.wait_line(r"listening on (http://127\.0\.0\.1:\d+)", timeout=60).group(1)
    return process, url


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    return data


def _body(prompt: str, latency_ms: int) -> dict[str, Any]:
    return {
        "operation": "generate",
        "prompt": f"[mock:latency={latency_ms}] {prompt}",
        "parameters": {"size": "16x16"},
    }


def _submit(client: httpx.Client, prompt: str, latency_ms: int) -> str:
    response = client.post("/v1/jobs", json=_body(prompt, latency_ms))
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


def _statuses(client: httpx.Client, ids: list[str]) -> set[str]:
    return {client.get(f"/v1/jobs/{job_id}").json()["status"] for job_id in ids}


def _all_running(client: httpx.Client, ids: list[str]) -> bool:
    return _statuses(client, ids) == {"running"}


def _all_claimed(client: httpx.Client, quick: list[str], slow: list[str]) -> bool:
    """Every job taken by the runner: the slow ones running, the quick ones running or
    already done (on a busy machine the first quick job may finish its 2 s before the last
    slow one is claimed, so "all ten running at once" may never be seen)."""
    return _all_running(client, slow) and _statuses(client, quick) <= {"running", "succeeded"}


class _Stream(threading.Thread):
    """One ``/v1/images/stream`` request read to its end in a thread."""

    def __init__(self, url: str, n: int, latency_ms: int) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.body = _body(f"stream {n}", latency_ms)
        self.first_event = threading.Event()
        self.events: list[str] = []
        self.finished_at: float | None = None
        self.error: str | None = None

    def run(self) -> None:
        try:
            with (
                httpx.Client(base_url=self.url, timeout=60) as client,
                client.stream("POST", "/v1/images/stream", json=self.body) as response,
            ):
                assert response.status_code == 200
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        self.events.append(line.removeprefix("event: "))
                        self.first_event.set()
            self.finished_at = time.monotonic()
        except Exception as error:  # reported by the test's assertions
            self.error = repr(error)
            self.first_event.set()


def _jobs_rows(data: Path) -> dict[str, tuple[str, dict[str, Any] | None]]:
    with sqlite3.connect(data / "jobs.sqlite3") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = db.execute("SELECT id, status, error_json FROM image_jobs").fetchall()
    return {row[0]: (row[1], json.loads(row[2]) if row[2] else None) for row in rows}


def _check_files(data: Path) -> int:
    """No temporary file anywhere under the data directory; every image is whole."""
    images = 0
    for path in data.rglob("*"):
        assert not path.name.startswith(TEMP_PREFIX), path
        if path.is_file() and path.suffix == ".png":
            with Image.open(path) as image:
                image.load()  # a truncated file raises here
            images += 1
    return images


def _refused_while_draining(url: str) -> bool:
    """A new request is refused with 503 and Retry-After, and readiness is not ready."""
    with httpx.Client(base_url=url, timeout=10) as client:
        refused = client.post("/v1/images", json=_body("too late", 0))
        if refused.status_code != 503:
            return False
        assert refused.headers["retry-after"] == "1"
        error = refused.json()["error"]["imagegen_bridge"]
        assert error["code"] == "overloaded" and error["retryable"] is True
        assert error["details"]["reason"] == "shutting_down"
        assert client.get("/health/ready").status_code == 503
        assert client.get("/health/live").status_code == 200
        return True


def test_sigterm_drains_streams_and_jobs_then_exits_zero(data_dir: Path) -> None:
    process, url = _start(data_dir)
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            wait_or_fail(lambda: client.get("/health/ready").status_code == 200, STARTUP_S, "ready")
            quick = [_submit(client, f"quick job {n}", 2_000) for n in range(5)]
            slow = [_submit(client, f"slow job {n}", 120_000) for n in range(5)]
            wait_or_fail(lambda: _all_claimed(client, quick, slow), STATE_S, "10 jobs claimed")
        streams = [_Stream(url, n, 3_000) for n in range(5)]
        for stream in streams:
            stream.start()
        for stream in streams:
            assert stream.first_event.wait(30), "a stream never started"
        signalled = time.monotonic()
        process.popen.send_signal(signal.SIGTERM)
        wait_or_fail(lambda: _refused_while_draining(url), 10, "the drain refuses new requests")
        for stream in streams:
            stream.join(timeout=GRACE_MS / 1000 + 10)
        code = process.popen.wait(timeout=(GRACE_MS + SETTLE_MS) / 1000 + 20)
        stopped = time.monotonic() - signalled
    finally:
        if process.popen.poll() is None:
            process.popen.kill()
            process.popen.wait(timeout=10)
    assert code == 0, process.drain()[-20:]
    for stream in streams:
        assert stream.error is None, stream.error
        assert stream.events and stream.events[-1] == "completed", stream.events
        assert stream.finished_at is not None
        assert stream.finished_at - signalled < GRACE_MS / 1000
    # The slow jobs kept the process for the whole grace, no more than the settle after it.
    assert GRACE_MS / 1000 - 1 <= stopped < (GRACE_MS + SETTLE_MS) / 1000 + 5
    rows = _jobs_rows(data_dir)
    assert {rows[job_id][0] for job_id in quick} == {"succeeded"}
    for job_id in slow:
        status, error = rows[job_id]
        assert status == "interrupted"
        assert error is not None and error["details"]["recovery"] == RECOVERY
    assert "running" not in {status for status, _ in rows.values()}
    assert _check_files(data_dir) >= len(quick)


def test_a_second_sigterm_exits_at_once_without_half_written_files(data_dir: Path) -> None:
    process, url = _start(data_dir)
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            wait_or_fail(lambda: client.get("/health/ready").status_code == 200, STARTUP_S, "ready")
            jobs = [_submit(client, f"abandoned job {n}", 120_000) for n in range(3)]
            wait_or_fail(lambda: _all_running(client, jobs), STATE_S, "3 jobs running")
        stream = _Stream(url, 0, 120_000)
        stream.start()
        assert stream.first_event.wait(30)
        process.popen.send_signal(signal.SIGTERM)
        wait_or_fail(lambda: _refused_while_draining(url), 10, "the drain refuses new requests")
        signalled = time.monotonic()
        process.popen.send_signal(signal.SIGTERM)
        code = process.popen.wait(timeout=10)
        assert time.monotonic() - signalled < 5  # at once, not after the 12 s grace
    finally:
        if process.popen.poll() is None:
            process.popen.kill()
            process.popen.wait(timeout=10)
    assert code == 128 + signal.SIGTERM
    stream.join(timeout=10)
    assert stream.events[-1:] != ["completed"]  # cut off, not finished
    _check_files(data_dir)
    assert {status for status, _ in _jobs_rows(data_dir).values()} == {"running"}
    # The next start records the abandoned jobs interrupted, with the same hint.
    process, url = _start(data_dir)
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            for job_id in jobs:
                job = client.get(f"/v1/jobs/{job_id}").json()
                assert job["status"] == "interrupted"
                assert job["error"]["details"]["recovery"] == RECOVERY
    finally:
        process.popen.send_signal(signal.SIGTERM)
        assert process.popen.wait(timeout=30) == 0


def test_a_generation_kept_after_its_caller_left_finishes_within_the_grace(
    data_dir: Path,
) -> None:
    """Issue 39: a synchronous request whose client left after its provider call began
    is kept; SIGTERM's drain counts it, so it finishes, its image is kept and its record
    written before the process exits 0."""
    from tests.server.rawhttp import open_request

    calls = data_dir.parent / "calls.log"
    process, url = _start(data_dir, f'providers.mock.call_log="{calls}"')
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            wait_or_fail(lambda: client.get("/health/ready").status_code == 200, STARTUP_S, "ready")
            port = int(url.rsplit(":", 1)[1])
            sock = open_request(port, "/v1/images", _body("kept through a stop", 3_000))
            wait_or_fail(
                lambda: calls.exists() and calls.read_text(), 30, "the provider call began"
            )
            sock.close()  # the client goes away; then the bridge is told to stop
        process.popen.send_signal(signal.SIGTERM)
        code = process.popen.wait(timeout=(GRACE_MS + SETTLE_MS) / 1000 + 20)
    finally:
        if process.popen.poll() is None:
            process.popen.kill()
            process.popen.wait(timeout=10)
    assert code == 0, process.drain()[-20:]
    [(status, error)] = _jobs_rows(data_dir).values()
    assert (status, error) == ("succeeded", None)
    assert _check_files(data_dir) == 1  # the kept image, whole
