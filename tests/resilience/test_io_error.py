"""A real I/O error: the block device under a running bridge fails every write, then heals.

The kernel, not a mock, returns ``EIO``: the data directory is an ext4 filesystem on a zram
block device made by the test, and the scenario sets the device's ``mem_limit`` below what
it already holds, so zram ends every write request with an I/O error (``BLK_STS_IOERR``,
counted in its ``io_stat``), as a failing disk does; lifting the limit heals it. (This
kernel has no device-mapper, so the ``error``/``flakey`` targets cannot be used; zram is in
the mainline kernel and needs no extra tool.) The filesystem has no journal and is mounted
``errors=continue``: a journaled ext4 aborts its journal on a metadata write error and
stays read-only until it is unmounted and checked (docs/operations.md, "Faults of the
machine"), which no process can recover from without a restart.

Needs root (``CAP_SYS_ADMIN``), util-linux's ``unshare``/``mount``, e2fsprogs and the zram
driver; skipped elsewhere with the reason; CI runs it as root. The mount lives in a mount
namespace of its own; the device is always removed, also when the scenario fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ZRAM_CONTROL = Path("/sys/class/zram-control")
DEVICE_SIZE = "64M"


def _missing() -> str | None:
    """What this machine lacks for the test, or ``None``."""
    if os.geteuid() != 0:
        return (
            "needs root (CAP_SYS_ADMIN) to make and mount a zram block device; CI runs it as root"
        )
    for tool, package in (
        ("unshare", "util-linux"),
        ("mount", "util-linux"),
        ("mkfs.ext4", "e2fsprogs"),
        ("e2fsck", "e2fsprogs"),
    ):
        if shutil.which(tool) is None:
            return f"needs {tool} ({package}) to make the failing filesystem"
    if not ZRAM_CONTROL.exists() and shutil.which("modprobe") is not None:
        subprocess.run(
            ["modprobe", "zram", "num_devices=0"], capture_output=True, check=False, timeout=30
        )
    if not (ZRAM_CONTROL / "hot_add").exists():
        return (
            "needs the kernel's zram driver (/sys/class/zram-control; modprobe zram) "
            "for a block device that can fail"
        )
    return None


@contextlib.contextmanager
def zram_device() -> Iterator[tuple[str, Path]]:
    """A fresh 64 MiB zram device holding an ext4 without a journal; removed afterwards."""
    number = (ZRAM_CONTROL / "hot_add").read_text().strip()
    sysfs = Path(f"/sys/block/zram{number}")
    try:
        (sysfs / "disksize").write_text(DEVICE_SIZE + "\n")
        subprocess.run(
            ["mkfs.ext4", "-q", "-F", "-O", "^has_journal", f"/dev/zram{number}"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        yield f"/dev/zram{number}", sysfs
    finally:
        with contextlib.suppress(OSError):
            (sysfs / "mem_limit").write_text("0\n")
        deadline = time.monotonic() + 30
        while True:
            try:
                (ZRAM_CONTROL / "hot_remove").write_text(number + "\n")
                break
            except OSError:  # still mounted by a namespace that is ending: try again
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


@pytest.fixture
def report(tmp_path: Path) -> Iterator[dict[str, Any]]:
    missing = _missing()
    if missing is not None:
        pytest.skip(missing)
    with zram_device() as (device, sysfs):
        scenario = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                sys.executable,
                "-m",
                "tests.resilience.io_error_scenario",
                str(tmp_path),
                device,
                str(sysfs),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # the bridge too: one signal ends both on a timeout
        )
        try:
            stdout, stderr = scenario.communicate(timeout=300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(scenario.pid, signal.SIGKILL)
            scenario.wait(timeout=30)
        assert scenario.returncode == 0, stderr[-4000:]
        yield json.loads(stdout.strip().splitlines()[-1])


def _io_error_refusal(seen: dict[str, Any]) -> None:
    assert seen["status"] == 503
    assert (seen["code"], seen["retryable"], seen["x_should_retry"]) == ("internal", True, "true")
    assert seen["details"] == {"reason": "io_error", "storage": "database"}


def test_a_failing_block_device_answers_io_error_and_recovers_without_a_restart(
    report: dict[str, Any],
) -> None:
    before, failing, after = report["before"], report["failing"], report["after"]

    # Before: everything writes.
    assert before["artifact"]["types"] == ["artifact"]
    assert before["preset"]["status"] == 201
    assert before["job"]["job"]["status"] == "succeeded"

    # The device really failed writes, and ext4 stayed writable (errors=continue).
    assert report["failed_writes_during"] > report["failed_writes_before"]
    assert "rw" in report["mount_options_while_failing"]

    # Failing: the billed image arrives inline, never lost; nothing-billed writes are a
    # retryable 503 naming the I/O error; images that need no disk work as before.
    assert failing["artifact"]["status"] == 200
    assert failing["artifact"]["types"] == ["b64_json"]
    assert "artifact_not_stored" in failing["artifact"]["warnings"]
    assert failing["inline"]["status"] == 200 and failing["inline"]["types"] == ["b64_json"]
    _io_error_refusal(failing["preset"])
    _io_error_refusal(failing["job"]["submit"])
    assert failing["ready"]["status"] == 200  # reads are served: still ready…
    assert failing["ready"]["storage_header"] == "degraded; artifacts=io_error, database=io_error"

    reads = report["reads_while_failing"]
    assert [reads[k] for k in ("artifact", "thumbnail", "jobs", "presets")] == [200] * 4
    storage = reads["diagnostics_storage"]
    assert storage["status"] == "degraded"
    assert {area: seen["reason"] for area, seen in storage["areas"].items()} == {
        "artifacts": "io_error",
        "database": "io_error",
    }

    # Healthy again: the same process writes. A database connection that had not yet been
    # told of the failed writes of another is told once by the kernel (fsync reports each
    # write-back error to every open file once): that one answer is the same retryable
    # 503, and the retry succeeds, as an SDK's would.
    assert after["artifact"]["types"] == ["artifact"] and after["artifact"]["warnings"] == []
    *refused, accepted = after["preset"]
    assert accepted["status"] == 201 and len(refused) <= 1
    for seen in refused:
        _io_error_refusal(seen)
    assert [job["job"]["status"] for job in after["job"]] == ["succeeded", "succeeded"]
    assert after["ready"]["storage_header"] is None

    # Nothing written while failing is served or kept: no preset, no job from then.
    assert sorted(report["listed_after"]["presets"]) == ["p-after", "p-before"]
    assert report["listed_after"]["jobs"] == ["succeeded"] * 3

    # Read back from the device (unmounted, checked, mounted again): the filesystem is
    # clean, every file owned, no orphan marker, no temp file, PRAGMA integrity_check ok.
    assert report["fsck"]["code"] == 0, report["fsck"]["output"]
    assert report["problems"] == []
    assert report["stop_code"] == 0
    images = [n for n in report["left_in_artifacts"] if n.endswith(".png")]
    assert len(images) == 5  # before (a request, a job), after (a request, two jobs)
