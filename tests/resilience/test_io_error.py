"""A real I/O error: the block device under a running bridge fails every write, then heals.

The kernel, not a mock, returns ``EIO``: the data directory is an ext4 filesystem on a zram
block device made by the test, and the scenario sets the device's ``mem_limit`` below what
it already holds, so zram ends every write request with an I/O error (``BLK_STS_IOERR``,
counted in its ``io_stat``), as a failing disk does; lifting the limit heals it. (This
kernel has no device-mapper, so the ``error``/``flakey`` targets cannot be used; zram is in
the mainline kernel and needs no extra tool.) The filesystem has no journal and is mounted
``errors=continue``, so it stays writable. The second test uses a journaled ext4, which
aborts its journal on a failed metadata write and turns read-only whatever ``errors=``
says, and follows the operator's procedure of docs/operations.md, "Faults of the machine"
(stop the bridge, unmount, fsck, mount, start).

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

pytestmark = pytest.mark.slow

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
def zram_device(journal: bool) -> Iterator[tuple[str, Path]]:
    """A fresh 64 MiB zram device holding an ext4 (with or without a journal); removed
    afterwards."""
    number = (ZRAM_CONTROL / "hot_add").read_text().strip()
    sysfs = Path(f"/sys/block/zram{number}")
    try:
        (sysfs / "disksize").write_text(DEVICE_SIZE + "\n")
        subprocess.run(
            [
                "mkfs.ext4",
                "-q",
                "-F",
                *([] if journal else ["-O", "^has_journal"]),
                f"/dev/zram{number}",
            ],
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


def run_scenario(tmp_path: Path, journal: bool) -> dict[str, Any]:
    missing = _missing()
    if missing is not None:
        pytest.skip(missing)
    with zram_device(journal) as (device, sysfs):
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
                *(["journal"] if journal else []),
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
        result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
        return result


@pytest.fixture
def report(tmp_path: Path) -> dict[str, Any]:
    return run_scenario(tmp_path, journal=False)


@pytest.fixture
def journaled_report(tmp_path: Path) -> dict[str, Any]:
    return run_scenario(tmp_path, journal=True)


def _io_error_refusal(seen: dict[str, Any]) -> None:
    assert seen["status"] == 503
    assert (seen["code"], seen["retryable"], seen["x_should_retry"]) == ("internal", True, "true")
    assert seen["details"] == {"reason": "io_error", "storage": "database"}


def _failing_answers(report: dict[str, Any]) -> None:
    """While the device fails: the documented answers, reads served, health degraded."""
    failing = report["failing"]
    assert report["failed_writes_during"] > report["failed_writes_before"]
    # The billed image arrives inline, never lost; nothing-billed writes are a retryable
    # 503 naming the I/O error; images that need no disk work as before.
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


def _writes_again_and_verifies(report: dict[str, Any]) -> None:
    """Healthy again: every write works; nothing from the failing time kept; the data
    directory, read back from the device, verifies."""
    after = report["after"]
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
    # Synchronous requests' records (issue 39): the ones made while the disk worked, each
    # finished; while it failed a request ran without a record (the history refused it).
    synchronous = report["listed_after"]["synchronous"]
    assert len(synchronous) >= 3 and set(synchronous) == {"succeeded"}
    # Unmounted, checked, mounted again: the filesystem is clean, every file owned, no
    # orphan marker, no temp file, PRAGMA integrity_check ok, no job row left running.
    assert report["fsck"]["code"] == 0, report["fsck"]["output"]
    assert report["problems"] == []
    assert report["stop_code"] == 0
    images = [n for n in report["left_in_artifacts"] if n.endswith(".png")]
    # before: a request, the kept copy of an inline one, a job; after: a request, two jobs
    assert len(images) == 6


def test_a_failing_block_device_answers_io_error_and_recovers_without_a_restart(
    report: dict[str, Any],
) -> None:
    before = report["before"]
    assert before["artifact"]["types"] == ["artifact"]
    assert before["preset"]["status"] == 201
    assert before["job"]["job"]["status"] == "succeeded"

    # ext4 without a journal, errors=continue: it stays writable while the device fails.
    assert "rw" in report["mount_options_while_failing"]
    _failing_answers(report)

    # Healthy again, the same process: a database connection that had not yet been told
    # of another's failed write is told once by the kernel (fsync reports each write-back
    # error to every file open at the time, once): that answer is the same retryable 503,
    # and the retry succeeds, as an SDK's would.
    _writes_again_and_verifies(report)


def test_a_journaled_ext4_turned_read_only_answers_read_only_until_remounted(
    journaled_report: dict[str, Any],
) -> None:
    report = journaled_report
    _failing_answers(report)

    # The journal aborted: the kernel made the filesystem read-only, and it stays so after
    # the device healed. The bridge keeps serving reads and says what is wrong; a stored
    # image still arrives inline.
    assert report["turned_read_only"] is True
    assert "emergency_ro" in report["mount_options_healed"]
    read_only = report["read_only"]
    assert read_only["artifact"]["types"] == ["b64_json"]
    assert "artifact_not_stored" in read_only["artifact"]["warnings"]
    # SQLite reports a write the kernel refuses as an I/O error.
    _io_error_refusal(read_only["preset"])
    _io_error_refusal(read_only["job"]["submit"])
    assert read_only["ready"]["storage_header"] == (
        "degraded; artifacts=read_only, database=io_error"
    )
    reads = report["reads_read_only"]
    assert [reads[k] for k in ("artifact", "thumbnail", "jobs", "presets")] == [200] * 4

    # The operator's procedure (docs/operations.md): stop the bridge, unmount, fsck, mount,
    # start it again. Then every write works and the data directory verifies.
    assert report["stop_code"] == 0
    assert report["fsck_repair"]["code"] in (0, 1), report["fsck_repair"]["output"]
    assert report["stop_code_restarted"] == 0
    _writes_again_and_verifies(report)
