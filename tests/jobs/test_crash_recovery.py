"""A bridge killed with SIGKILL mid-work loses nothing and never re-runs uncertain work.

A real ``python -m imagebridge.server`` process (mock provider with latency, four workers)
takes 30 durable jobs and is killed with ``kill -9`` while some of them are with the
provider. A second process on the same data directory must then show every job; finish
each one that was still queued; record each one that was running as ``interrupted`` with
``details.recovery = "inspect_history_before_retrying"`` and never run it again; leave no
half-written artifact under a published name; and keep a database that passes
``PRAGMA integrity_check``. Provider calls are counted directly: the mock appends
``<pid> <request id>`` to a call log before each call (``providers.mock.call_log``), and a
job's request id is its job id.

The test only polls (bounded, generous deadlines), so it holds on a loaded 2-core machine.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from imagebridge.artifacts.filesystem.markers import OWNERSHIP_DIRECTORY
from imagebridge.artifacts.filesystem.store import ArtifactStore

pytestmark = pytest.mark.slow

JOBS = 30
MAX_RUNNING = 4
FIRST_LATENCY_MS = 1500
RESTART_LATENCY_MS = 150
TEMP_PREFIX = ".imagegen-bridge-tmp-"
RECOVERY = "inspect_history_before_retrying"
TERMINAL = {"succeeded", "failed", "cancelled", "interrupted"}
CONFIG = f"""
default_provider = "mock"

[providers.codex_responses]
enabled = false

[providers.codex_app_server]
enabled = false

[providers.mock]
latency_ms = {FIRST_LATENCY_MS}
call_log = "{{calls}}"

[server.jobs]
max_running = {MAX_RUNNING}
"""


class Bridge:
    """One server process; its stderr is drained so it can never block on a full pipe."""

    def __init__(self, config: Path, env: dict[str, str], *sets: str) -> None:
        args = ["--config", str(config), "--bind", "127.0.0.1:0"]
        for item in sets:
            args += ["--set", item]
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "imagebridge.server", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = self._wait_url(timeout=60)

    def _drain(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self._lines.put(line.rstrip("\n"))

    def _wait_url(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.1)
            except queue.Empty:
                if self.popen.poll() is not None:
                    break
                continue
            self.seen.append(line)
            match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if match:
                return match.group(1)
        self.ensure_stopped()
        raise AssertionError(f"bridge did not start; stderr: {self.seen[-20:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, exactly like a power cut for the process."""
        os.kill(self.popen.pid, signal.SIGKILL)
        assert self.popen.wait(timeout=30) == -signal.SIGKILL

    def terminate(self) -> None:
        self.popen.send_signal(signal.SIGTERM)
        assert self.popen.wait(timeout=60) == 0

    def ensure_stopped(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=30)


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Bridge]]:
    """Start bridges on one data directory; any still running at the end are killed."""
    config = tmp_path / "bridge.toml"
    config.write_text(CONFIG.replace("{calls}", str(tmp_path / "calls.log")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEGEN_BRIDGE")}
    env["IMAGEGEN_BRIDGE_DATA_DIR"] = str(tmp_path / "data")
    started: list[Bridge] = []

    def start(*sets: str) -> Bridge:
        bridge = Bridge(config, env, *sets)
        started.append(bridge)
        return bridge

    yield start
    for bridge in started:
        bridge.ensure_stopped()


def poll(check: Callable[[], Any], what: str, timeout: float = 120.0) -> Any:
    """Call ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def history(client: httpx.Client) -> dict[str, dict[str, Any]]:
    page = client.get("/v1/jobs", params={"limit": 100, "visibility": "all"})
    assert page.status_code == 200, page.text
    assert "next_cursor" not in page.json()
    return {item["id"]: item for item in page.json()["items"]}


def integrity(database: Path) -> str:
    connection = sqlite3.connect(database)
    try:
        return str(connection.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        connection.close()


def published_files(root: Path) -> tuple[list[Path], list[Path]]:
    """(files under published names, temp files) below the artifact root."""
    published: list[Path] = []
    temps: list[Path] = []
    for directory, _, names in os.walk(root):
        for name in names:
            (temps if name.startswith(TEMP_PREFIX) else published).append(Path(directory, name))
    return published, temps


def markers(root: Path) -> dict[str, dict[str, Any]]:
    owned: dict[str, dict[str, Any]] = {}
    for path in (root / OWNERSHIP_DIRECTORY).iterdir():
        if path.name.startswith(TEMP_PREFIX):
            continue
        record = json.loads(path.read_bytes())
        assert path.name == f"{record['id']}.json"
        owned[record["id"]] = record
    return owned


def provider_calls(log: Path) -> list[tuple[int, str]]:
    """(process id, job id) for every provider call, in call order."""
    calls = []
    for line in log.read_text().splitlines():
        pid, request_id = line.split(" ")
        calls.append((int(pid), request_id))
    return calls


def is_complete_image(path: Path) -> bool:
    try:
        with Image.open(path) as image:
            image.load()
    except OSError:
        return False
    return True


def test_a_killed_bridge_recovers_every_job_without_rerunning_uncertain_work(
    launch: Callable[..., Bridge], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    log = tmp_path / "calls.log"
    first = launch()
    with httpx.Client(base_url=first.url, timeout=30) as client:
        ids = []
        for n in range(JOBS):
            body = {
                "operation": "generate",
                "prompt": f"crash recovery {n}",
                "parameters": {"size": "64x64"},
            }
            created = client.post("/v1/jobs", json=body)
            assert created.status_code == 202, created.text
            ids.append(created.json()["id"])

        def busy() -> dict[str, dict[str, Any]] | None:
            # Kill while workers hold jobs and plenty are still waiting, so some row is
            # surely `running` in the database at the moment of the kill.
            jobs = history(client)
            statuses = [job["status"] for job in jobs.values()]
            if statuses.count("running") >= 1 and statuses.count("queued") >= 2 * MAX_RUNNING:
                return jobs
            return None

        before = poll(busy, "jobs to be running with more still queued", timeout=60)
        first.kill()
    first_calls = provider_calls(log)

    database = data / "jobs.sqlite3"
    assert integrity(database) == "ok"  # the state the crash itself left behind
    finished_before = {i for i, job in before.items() if job["status"] == "succeeded"}
    assert set(before) == set(ids)

    second = launch(f"providers.mock.latency_ms={RESTART_LATENCY_MS}")
    with httpx.Client(base_url=second.url, timeout=30) as client:

        def settled() -> dict[str, dict[str, Any]] | None:
            jobs = history(client)
            done = all(job["status"] in TERMINAL for job in jobs.values())
            return jobs if done and len(jobs) == JOBS else None

        poll(settled, "every recovered job to finish")
        final = {}
        for job_id in ids:
            detail = client.get(f"/v1/jobs/{job_id}")
            assert detail.status_code == 200, detail.text
            final[job_id] = detail.json()
    second.terminate()

    interrupted = {i for i, job in final.items() if job["status"] == "interrupted"}
    succeeded = {i for i, job in final.items() if job["status"] == "succeeded"}
    assert interrupted | succeeded == set(ids), {i: j["status"] for i, j in final.items()}
    # Only jobs a worker held at the kill are interrupted: at most one per worker.
    assert 1 <= len(interrupted) <= MAX_RUNNING
    assert finished_before <= succeeded
    # At most one provider call per job over both lives of the bridge: every finished job
    # was called once; an interrupted one at most once, before the kill (a kill between
    # the claim and the call leaves it uncalled), and never by the restarted bridge.
    calls = provider_calls(log)
    called = [job_id for _, job_id in calls]
    assert len(called) == len(set(called)), "a job reached the provider twice"
    assert succeeded <= set(called) <= set(ids)
    assert {pid for pid, _ in first_calls} == {first.popen.pid}
    after_restart = calls[len(first_calls) :]
    assert {pid for pid, _ in after_restart} == {second.popen.pid}
    assert not interrupted & {job_id for _, job_id in after_restart}
    for job_id in interrupted:
        job = final[job_id]
        assert before[job_id]["status"] in {"queued", "running"}
        assert "result" not in job
        error = job["error"]
        assert error["code"] == "cancelled"
        assert error["retryable"] is False
        assert error["message"] == "bridge stopped while provider completion was uncertain"
        assert error["details"]["recovery"] == RECOVERY
    results: dict[str, str] = {}
    for job_id in succeeded:
        result = final[job_id]["result"]
        assert result["id"] == job_id
        assert len(result["data"]) == 1
        item = result["data"][0]
        assert item["type"] == "artifact"
        results[item["id"]] = item["sha256"]

    root = data / "artifacts"
    owned = markers(root)
    store = ArtifactStore(root)
    for artifact_id in owned:
        content = store.read(artifact_id, None)  # SHA-256 against the marker + full decode
        assert artifact_id not in results or results[artifact_id] == content.info.sha256
    # Every delivered artifact is owned and intact. Beyond those, each interrupted job may
    # have published its one image just before the kill; nothing ran a second time.
    assert set(results) <= set(owned)
    assert len(set(owned) - set(results)) <= len(interrupted)

    published, _temps = published_files(root)
    referenced = {root / record["name"] for record in owned.values()}
    referenced |= {root / r["sidecar_name"] for r in owned.values() if r.get("sidecar_name")}
    referenced |= {root / OWNERSHIP_DIRECTORY / f"{i}.json" for i in owned}
    stranded = [path for path in published if path not in referenced]
    # A file under a published name is never partial: bytes are written to a temp file
    # and linked into place complete. The only unowned files a kill can leave are ones
    # linked in the instant before their ownership marker was written (one per job).
    assert all(is_complete_image(path) for path in stranded), stranded
    assert len(stranded) <= len(interrupted) - len(set(owned) - set(results)), stranded
    assert integrity(database) == "ok"
