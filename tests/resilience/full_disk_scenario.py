"""The full-disk scenario, run by test_full_disk.py inside its own mount namespace.

``python -m tests.resilience.full_disk_scenario WORKDIR SIZE`` (as root, under
``unshare --mount --propagation private``) mounts a tmpfs of SIZE on ``WORKDIR/data``, starts
a bridge whose artifacts, jobs and presets all live there, and then:

1. checks that a stored image and a job work;
2. fills the filesystem to the last byte with a filler file;
3. sends every kind of request and records what each answered, and checks reads;
4. removes the filler and sends the same writes again;
5. stops the bridge and checks the data directory.

It prints one JSON document of observations on stdout; the test asserts on it. The mount
disappears with the namespace when this process exits.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.bridge_server import data_dir_problems, start_server

IMAGE: dict[str, Any] = {
    "operation": "generate",
    "prompt": "a fox on a full disk",
    "parameters": {"size": "256x256"},
    "output": {"response_format": "artifact"},
}
INLINE: dict[str, Any] = {**IMAGE, "output": {"response_format": "b64_json"}}


def fill(path: Path) -> int:
    """Write ``path`` until the filesystem refuses one more byte; return its size."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    written = 0
    try:
        for chunk in (1 << 20, 1 << 12, 1):
            block = b"\0" * chunk
            while True:
                try:
                    written += os.write(fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return written


def answer(response: httpx.Response) -> dict[str, Any]:
    """Status, the headers that say what to do, and the body's error or items."""
    seen: dict[str, Any] = {
        "status": response.status_code,
        "x_should_retry": response.headers.get("x-should-retry"),
        "storage_header": response.headers.get("x-imagebridge-storage"),
    }
    try:
        body = response.json()
    except ValueError:
        return seen
    if isinstance(body, dict) and "error" in body:
        native = body["error"].get("imagegen_bridge", {})
        seen["code"] = native.get("code")
        seen["retryable"] = native.get("retryable")
        seen["details"] = native.get("details", {})
    elif isinstance(body, dict):
        seen["types"] = [item.get("type") for item in body.get("data", [])]
        seen["warnings"] = body.get("warnings", [])
        seen["status_field"] = body.get("status")
        seen["id"] = body.get("id")
        seen["artifact_ids"] = [item.get("id") for item in body.get("data", []) if item.get("id")]
    return seen


def wait_job(client: httpx.Client, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job.get("status") in {"succeeded", "failed", "cancelled", "interrupted"}:
            return job
        if time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def settle(client: httpx.Client, timeout: float = 60.0) -> None:
    """Wait until no history record runs: a synchronous answer's image is kept (and its
    record written) just after the answer, so a fault begun at once would take it too."""
    deadline = time.monotonic() + timeout
    while client.get("/v1/jobs", params={"status": "running"}).json()["items"]:
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


def job_outcome(client: httpx.Client) -> dict[str, Any]:
    submitted = client.post("/v1/jobs", json=IMAGE)
    seen = {"submit": answer(submitted)}
    if submitted.status_code == 202:
        job = wait_job(client, submitted.json()["id"])
        result = job.get("result") or {}
        seen["job"] = {
            "status": job.get("status"),
            "error": job.get("error"),
            "types": [item.get("type") for item in result.get("data", [])],
            "warnings": result.get("warnings", []),
        }
    return seen


def writes(client: httpx.Client, tag: str) -> dict[str, Any]:
    return {
        "artifact": answer(client.post("/v1/images", json=IMAGE)),
        "inline": answer(client.post("/v1/images", json=INLINE)),
        "preset": answer(
            client.post(
                "/v1/presets", json={"name": f"p-{tag}", "template": {"prompt": "x" * 4096}}
            )
        ),
        "job": job_outcome(client),
        "ready": answer(client.get("/health/ready")),
    }


def main() -> None:
    workdir, size = Path(sys.argv[1]), sys.argv[2]
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(data)], check=True)
    filler = data / "filler"
    report: dict[str, Any] = {}
    server = start_server(data / "bridge", "artifacts.retention.repair_interval_secs=0")
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            report["before"] = writes(client, "before")
            kept = report["before"]["artifact"]["artifact_ids"][0]
            settle(client)
            report["filler_bytes"] = fill(filler)
            report["full"] = writes(client, "full")
            report["reads_while_full"] = {
                "artifact": client.get(f"/v1/artifacts/{kept}").status_code,
                "thumbnail": client.get(f"/v1/artifacts/{kept}/thumbnail").status_code,
                "jobs": client.get("/v1/jobs").status_code,
                "presets": client.get("/v1/presets").status_code,
                "diagnostics_storage": client.get("/v1/diagnostics/extended").json()["storage"],
            }
            filler.unlink()
            report["after"] = writes(client, "after")
    finally:
        report["stop_code"] = server.stop()
        report["server_log_tail"] = server.output[-15:]
    report["problems"] = data_dir_problems(data / "bridge")
    with contextlib.suppress(OSError):
        report["left_in_artifacts"] = sorted(os.listdir(data / "bridge" / "artifacts"))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
