"""A real full disk: a size-limited tmpfs filled to the last byte under a running bridge.

Needs root (``CAP_SYS_ADMIN``) to mount the tmpfs; the mount is made in a mount namespace
of its own (``unshare --mount --propagation private``), so the machine's mounts never see
it. The scenario (full_disk_scenario.py) runs in that namespace and reports what every
request answered; this test holds it to docs/operations.md, "Faults of the machine".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _namespace_mounts_work(tmp_path: Path) -> str | None:
    """Why a tmpfs cannot be mounted in a private mount namespace here, or ``None``."""
    if os.geteuid() != 0:
        return "needs root (CAP_SYS_ADMIN) to mount a size-limited tmpfs; CI runs it as root"
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "needs util-linux's unshare and mount to make a private mount namespace"
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "mount",
            "-t",
            "tmpfs",
            "-o",
            "size=1m",
            "tmpfs",
            str(probe),
        ],
        capture_output=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        return "cannot mount a tmpfs in a private mount namespace (CAP_SYS_ADMIN missing?)"
    return None


@pytest.fixture
def report(tmp_path: Path) -> dict[str, Any]:
    missing = _namespace_mounts_work(tmp_path)
    if missing is not None:
        pytest.skip(missing)
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            "-m",
            "tests.resilience.full_disk_scenario",
            str(tmp_path),
            "16m",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_full_disk_mid_run_answers_as_documented_and_recovers_without_a_restart(
    report: dict[str, Any],
) -> None:
    before, full, after = report["before"], report["full"], report["after"]
    assert report["filler_bytes"] > 0

    # Before: everything writes.
    assert before["artifact"]["types"] == ["artifact"]
    assert before["preset"]["status"] == 201
    assert before["job"]["job"]["status"] == "succeeded"

    # Full: the billed image arrives inline, never lost; nothing-billed writes are a
    # retryable 503 naming the fault; images that need no disk work as before.
    assert full["artifact"]["status"] == 200
    assert full["artifact"]["types"] == ["b64_json"]
    assert "artifact_not_stored" in full["artifact"]["warnings"]
    assert full["inline"]["status"] == 200 and full["inline"]["types"] == ["b64_json"]
    for refused in (full["preset"], full["job"]["submit"]):
        assert refused["status"] == 503
        assert (refused["code"], refused["retryable"], refused["x_should_retry"]) == (
            "internal",
            True,
            "true",
        )
        assert refused["details"] == {"reason": "no_space", "storage": "database"}
    assert full["ready"]["status"] == 200  # reads are served: still ready…
    assert full["ready"]["storage_header"] == "degraded; artifacts=no_space, database=no_space"

    reads = report["reads_while_full"]
    assert (reads["artifact"], reads["thumbnail"], reads["jobs"], reads["presets"]) == (
        200,
        200,
        200,
        200,
    )
    assert reads["diagnostics_storage"]["status"] == "degraded"
    assert set(reads["diagnostics_storage"]["areas"]) == {"artifacts", "database"}

    # Space back: the same process writes again, and says it is healthy again.
    assert after["artifact"]["types"] == ["artifact"] and after["artifact"]["warnings"] == []
    assert after["preset"]["status"] == 201
    assert after["job"]["job"]["status"] == "succeeded"
    assert after["ready"]["storage_header"] is None

    # And the data directory verifies: every file owned, no orphan marker, no temp file,
    # PRAGMA integrity_check ok, no job row left running; the bridge stopped cleanly.
    assert report["problems"] == []
    assert report["stop_code"] == 0
    images = [n for n in report["left_in_artifacts"] if n.endswith(".png")]
    # Before and after, each a request, the kept copy of an inline request (issue 39) and a
    # job: none from "full".
    assert len(images) == 6
