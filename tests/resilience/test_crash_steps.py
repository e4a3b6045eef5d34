"""Kill -9 at every step boundary of every multi-step write, then restart.

A real server process runs with ``IMAGEBRIDGE_TEST_CRASH_AT=<step>``; the request that
reaches that step makes the process ``SIGKILL`` itself there (engine/crash_points.py: no
``finally``, no ``atexit``, no flush runs, as with ``kill -9``). The test then ages the
crash's temp files past the grace (as an hour passing would), restarts the server without
the variable and checks the data directory once its start-up repair has run: no file
nobody owns, no marker naming a missing file or sidecar, no temp file, the database
verifies and no job row is left ``running``; a job killed before its outcome row is
``interrupted`` with the recovery hint; a preset killed before its commit does not exist.
And the next request succeeds. The table of these steps is in docs/operations.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from imagebridge.engine.crash_points import CRASH_ENV
from tests.support.bridge_server import (
    ServerProcess,
    backdate_temp_files,
    data_dir_problems,
    start_server,
)

pytestmark = pytest.mark.slow

IMAGE: dict[str, Any] = {
    "operation": "generate",
    "prompt": "a crash test fox",
    "parameters": {"size": "16x16"},
    "output": {"response_format": "artifact"},
}
SIDECAR: dict[str, Any] = {
    **IMAGE,
    "output": {"response_format": "artifact", "metadata": "sidecar"},
}
PRESET: dict[str, Any] = {"name": "crash-preset", "template": {"prompt": "kept?"}}


def _send(server: ServerProcess, path: str, body: dict[str, Any]) -> httpx.Response | None:
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            return client.post(path, json=body)
    except httpx.HTTPError:
        return None  # the process died under the request


def _wait_clean(data_dir: Path, timeout: float = 60.0) -> list[str]:
    """The data directory's problems once the start-up repair has run (or what remains)."""
    deadline = time.monotonic() + timeout
    while True:
        problems = data_dir_problems(data_dir)
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(0.1)


def _crash_then_restart(
    tmp_path: Path,
    processes: list[ServerProcess],
    step: str,
    act: Callable[[ServerProcess], Any],
) -> ServerProcess:
    data = tmp_path / "data"
    doomed = start_server(data, env={CRASH_ENV: step})
    processes.append(doomed)
    act(doomed)
    assert doomed.wait_dead() == -9, f"the process did not die at {step}"
    backdate_temp_files(data / "artifacts", 2 * 3600)
    server = start_server(data)
    processes.append(server)
    assert _wait_clean(data) == []
    with httpx.Client(base_url=server.url, timeout=60) as client:
        after = client.post("/v1/images", json=SIDECAR)
    assert after.status_code == 200, after.text
    # Its image is kept and its record written just after the answer (issue 39).
    assert _wait_clean(data, timeout=30) == []
    return server


@pytest.mark.parametrize(
    "step",
    [
        "artifact.temp_written",
        "artifact.marker_written",
        "artifact.linked",
    ],
)
def test_a_kill_while_publishing_an_artifact(
    tmp_path: Path, processes: list[ServerProcess], step: str
) -> None:
    _crash_then_restart(tmp_path, processes, step, lambda s: _send(s, "/v1/images", IMAGE))


@pytest.mark.parametrize(
    "step", ["sidecar.temp_written", "sidecar.marker_written", "sidecar.linked"]
)
def test_a_kill_while_attaching_a_metadata_sidecar(
    tmp_path: Path, processes: list[ServerProcess], step: str
) -> None:
    _crash_then_restart(tmp_path, processes, step, lambda s: _send(s, "/v1/images", SIDECAR))


def test_a_kill_between_a_jobs_artifacts_and_its_outcome_row(
    tmp_path: Path, processes: list[ServerProcess]
) -> None:
    created: list[str] = []

    def submit(server: ServerProcess) -> None:
        answer = _send(server, "/v1/jobs", IMAGE)
        assert answer is not None and answer.status_code == 202, answer
        created.append(answer.json()["id"])

    server = _crash_then_restart(tmp_path, processes, "job.result_pending", submit)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        job = client.get(f"/v1/jobs/{created[0]}").json()
    assert job["status"] == "interrupted"
    assert job["error"]["details"]["recovery"] == "inspect_history_before_retrying"


def test_a_kill_inside_a_presets_transaction(
    tmp_path: Path, processes: list[ServerProcess]
) -> None:
    server = _crash_then_restart(
        tmp_path, processes, "preset.inserted", lambda s: _send(s, "/v1/presets", PRESET)
    )
    with httpx.Client(base_url=server.url, timeout=60) as client:
        assert client.get(f"/v1/presets/{PRESET['name']}").status_code == 404
        assert client.post("/v1/presets", json=PRESET).status_code == 201
