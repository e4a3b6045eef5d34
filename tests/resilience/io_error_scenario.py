"""The I/O-error scenario, run by test_io_error.py inside its own mount namespace.

``python -m tests.resilience.io_error_scenario WORKDIR DEVICE SYSFS`` (as root, under
``unshare --mount --propagation private``) mounts the ext4 filesystem on the zram block
device DEVICE (made by the test, without a journal, mounted ``errors=continue``) on
``WORKDIR/data``, starts a bridge whose artifacts, jobs and presets all live there, and then:

1. checks that a stored image and a job work;
2. makes the device fail every write: SYSFS/``mem_limit`` is set below the memory the zram
   device already holds, so the kernel ends each write request to it with an I/O error
   (``BLK_STS_IOERR``) and ext4 reports ``EIO`` to the bridge's ``fsync``;
3. sends every kind of request and records what each answered, and checks reads;
4. lifts the limit (the device is healthy again) and sends the same writes again, each
   retried (as an OpenAI SDK would) while it answers a retryable 503;
5. stops the bridge, unmounts, runs ``e2fsck -fn`` on the device, mounts it again (so what
   is checked was read from the device, not the page cache) and checks the data directory.

It prints one JSON document of observations on stdout; the test asserts on it.
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

from tests.resilience.full_disk_scenario import IMAGE, answer, job_outcome, settle, writes
from tests.support.bridge_server import data_dir_problems, start_server


def failed_writes(sysfs: Path) -> int:
    """How many write requests the zram device has ended with an error so far."""
    return int((sysfs / "io_stat").read_text().split()[1])


def mount_options(mountpoint: Path) -> list[str]:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[1] == str(mountpoint):
            return fields[3].split(",")
    return []


def wait_read_only(mountpoint: Path, timeout: float = 30.0) -> bool:
    """Change metadata and commit the journal (it fails, so the journal aborts) until the
    kernel refuses writes with ``EROFS``."""
    deadline = time.monotonic() + timeout
    probe = mountpoint / "probe"
    while time.monotonic() < deadline:
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError as exc:
            if exc.errno == errno.EROFS:
                return True
        os.sync()
        time.sleep(0.2)
    return False


def until_accepted(send: Any, accepted: int) -> list[dict[str, Any]]:
    """Every answer to ``send()`` up to the first with status ``accepted`` (at most 3)."""
    answers = [answer(send())]
    while answers[-1]["status"] != accepted and len(answers) < 3:
        answers.append(answer(send()))
    return answers


def writes_after(client: httpx.Client) -> dict[str, Any]:
    """The writes again once the device is healthy, each retried on a retryable 503."""
    preset = {"name": "p-after", "template": {"prompt": "x" * 4096}}
    return {
        "artifact": answer(client.post("/v1/images", json=IMAGE)),
        "preset": until_accepted(lambda: client.post("/v1/presets", json=preset), 201),
        "job": [job_outcome(client) for _ in range(2)],
        "ready": answer(client.get("/health/ready")),
    }


def reads(client: httpx.Client, kept: str) -> dict[str, Any]:
    return {
        "artifact": client.get(f"/v1/artifacts/{kept}").status_code,
        "thumbnail": client.get(f"/v1/artifacts/{kept}/thumbnail").status_code,
        "jobs": client.get("/v1/jobs").status_code,
        "presets": client.get("/v1/presets").status_code,
        "diagnostics_storage": client.get("/v1/diagnostics/extended").json()["storage"],
    }


def listed(client: httpx.Client) -> dict[str, Any]:
    settle(client)
    history = client.get("/v1/jobs", params={"origin": "sync"}).json()["items"]
    return {
        "presets": [p["name"] for p in client.get("/v1/presets").json()["items"]],
        "jobs": [
            j["status"] for j in client.get("/v1/jobs", params={"origin": "job"}).json()["items"]
        ],
        "synchronous": [j["status"] for j in history],
    }


def fsck(device: str, repair: bool) -> dict[str, Any]:
    done = subprocess.run(
        ["e2fsck", "-fy" if repair else "-fn", device], capture_output=True, text=True, check=False
    )
    return {"code": done.returncode, "output": done.stdout[-2000:] + done.stderr[-500:]}


def main() -> None:
    workdir, device, sysfs = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    journaled = sys.argv[4:] == ["journal"]
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-o", "errors=continue", device, str(data)], check=True)
    report: dict[str, Any] = {}
    sets = "artifacts.retention.repair_interval_secs=0"
    server = start_server(data / "bridge", sets)
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            report["before"] = writes(client, "before")
            kept = report["before"]["artifact"]["artifact_ids"][0]
            settle(client)
            os.sync()
            # One page: less than the device already holds, so every new write fails.
            (sysfs / "mem_limit").write_text("4096\n")
            report["failed_writes_before"] = failed_writes(sysfs)
            report["failing"] = writes(client, "failing")
            report["mount_options_while_failing"] = mount_options(data)
            report["reads_while_failing"] = reads(client, kept)
            if journaled:
                report["turned_read_only"] = wait_read_only(data)
            report["failed_writes_during"] = failed_writes(sysfs)
            (sysfs / "mem_limit").write_text("0\n")  # no limit: the device is healthy again
            if journaled:
                # The kernel turned the filesystem read-only; the device is fine again.
                report["mount_options_healed"] = mount_options(data)
                report["read_only"] = writes(client, "read-only")
                report["reads_read_only"] = reads(client, kept)
            else:
                report["after"] = writes_after(client)
                report["listed_after"] = listed(client)
    finally:
        with contextlib.suppress(OSError):
            (sysfs / "mem_limit").write_text("0\n")
        report["stop_code"] = server.stop()
        report["server_log_tail"] = server.output[-15:]
    if journaled:
        # What an operator does (docs/operations.md): bridge stopped, unmount, fsck, mount,
        # start the bridge again.
        subprocess.run(["umount", str(data)], check=True)
        report["fsck_repair"] = fsck(device, repair=True)
        subprocess.run(["mount", "-o", "errors=continue", device, str(data)], check=True)
        server = start_server(data / "bridge", sets)
        try:
            with httpx.Client(base_url=server.url, timeout=120) as client:
                report["after"] = writes_after(client)
                report["listed_after"] = listed(client)
        finally:
            report["stop_code_restarted"] = server.stop()
    subprocess.run(["umount", str(data)], check=True)
    report["fsck"] = fsck(device, repair=False)
    subprocess.run(["mount", device, str(data)], check=True)
    try:
        report["problems"] = data_dir_problems(data / "bridge")
        with contextlib.suppress(OSError):
            report["left_in_artifacts"] = sorted(os.listdir(data / "bridge" / "artifacts"))
    finally:
        subprocess.run(["umount", str(data)], check=False)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
