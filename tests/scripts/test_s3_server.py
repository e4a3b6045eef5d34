"""``scripts/s3-server``: a real S3 server that signs, stores, goes away and comes back.

The S3 tier's tests and the S3 benchmark stand on it, so these check what they rely on:
a bucket that accepts SigV4-signed objects with the printed keys and refuses other keys,
a gateway that can be stopped and restarted with its objects kept, and a ``run`` that
takes every daemon and its directory with it when its standard input closes. Requests are
signed by curl (``--aws-sigv4``), which the script needs anyway.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.support.s3 import S3_SCRIPT, S3Server, missing_s3_programs

pytestmark = pytest.mark.s3


def _curl(server: S3Server, *args: str, secret: str | None = None) -> tuple[int, bytes]:
    done = subprocess.run(
        [
            "curl",
            "-s",
            "--max-time",
            "30",
            "--aws-sigv4",
            f"aws:amz:{server.region}:s3",
            "--user",
            f"{server.access_key_id}:{secret or server.secret_access_key}",
            "-H",
            "x-amz-content-sha256: UNSIGNED-PAYLOAD",
            "-w",
            "\n%{http_code}",
            *args,
        ],
        capture_output=True,
        check=False,
        timeout=60,
    )
    body, _, status = done.stdout.rpartition(b"\n")
    return int(status or b"0"), body


def _url(server: S3Server, key: str) -> str:
    return f"{server.endpoint}/{server.bucket}/{key}"


def test_an_object_put_with_the_printed_keys_reads_back(
    s3_server: S3Server, s3_prefix: str
) -> None:
    payload = os.urandom(64 * 1024)
    with tempfile.NamedTemporaryFile() as source:
        source.write(payload)
        source.flush()
        status, _ = _curl(
            s3_server,
            "-X",
            "PUT",
            "--data-binary",
            f"@{source.name}",
            _url(s3_server, f"{s3_prefix}a.bin"),
        )
    assert status == 200
    status, body = _curl(s3_server, _url(s3_server, f"{s3_prefix}a.bin"))
    assert (status, body) == (200, payload)


def test_a_wrong_secret_is_refused(s3_server: S3Server, s3_prefix: str) -> None:
    status, body = _curl(s3_server, _url(s3_server, f"{s3_prefix}x"), secret="wrong" * 8)
    assert status == 403 and b"SignatureDoesNotMatch" in body


def test_a_halted_gateway_refuses_connections_and_keeps_objects_when_resumed(
    s3_server: S3Server, s3_prefix: str
) -> None:
    key = _url(s3_server, f"{s3_prefix}kept")
    assert _curl(s3_server, "-X", "PUT", "--data-binary", "kept bytes", key)[0] == 200
    s3_server.halt_gateway()
    try:
        assert _curl(s3_server, key)[0] == 0  # curl: no HTTP answer at all
    finally:
        s3_server.resume_gateway()
    assert _curl(s3_server, key) == (200, b"kept bytes")


def _pids(directory: Path) -> list[int]:
    return [int(p.read_text()) for p in (directory / "run").glob("*.pid")]


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_run_stops_every_daemon_and_removes_its_directory_when_its_input_closes(
    tmp_path: Path,
) -> None:
    missing = missing_s3_programs()
    if missing:
        pytest.skip(f"no S3 server: Ceph RADOS Gateway is not installed ({missing})")
    directory = tmp_path / f"c-{uuid.uuid4().hex[:6]}"
    process = subprocess.Popen(
        [str(S3_SCRIPT), "run", str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None and process.stdin is not None
    try:
        lines = [process.stdout.readline() for _ in range(5)]
        assert lines[0].startswith("S3_ENDPOINT=http://127.0.0.1:")
        pids = _pids(directory)
        assert len(pids) == 3 and all(_running(pid) for pid in pids)
    finally:
        process.stdin.close()
        process.wait(timeout=60)
    assert process.returncode == 0
    assert not directory.exists()
    assert not any(_running(pid) for pid in pids)


def test_check_names_the_missing_programs(tmp_path: Path) -> None:
    (tmp_path / "bash").symlink_to("/bin/bash")
    done = subprocess.run(
        ["/bin/bash", str(S3_SCRIPT), "check"],
        env={"PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "radosgw" in done.stdout and "scripts/install-test-deps" in done.stdout
