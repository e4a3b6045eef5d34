"""A real S3 server for one test session: ``scripts/s3-server`` (Ceph RADOS Gateway).

``s3_server`` (session scope) runs ``scripts/s3-server run DIR``: a one-node Ceph cluster
keeping objects in memory and its S3 gateway on a free 127.0.0.1 port, with one bucket and
fresh random keys (about 1–2 s to start, ~115 MiB RSS for the three daemons). The script
stays in the foreground until its standard input closes, so the cluster goes away with this
process however it ends; at the end of the session the fixture closes the pipe and checks
that the directory is gone.

Tests using it skip, saying which programs are missing, only when Ceph is not installed
(``scripts/install-test-deps`` installs it). Tests share the bucket: each takes its own key
prefix (``s3_prefix``), so they never see each other's objects and need no cleanup.
``S3Server.halt_gateway`` / ``resume_gateway`` stop and restart the gateway alone (the
objects stay), for tests of a store that goes away; a test that halts it resumes it in a
``finally``.

The fixtures are registered once, as a plugin in ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from imagebridge.artifacts.s3.objects import S3Settings

from tests.support.waiting import STARTUP_S

__all__ = [
    "S3_SCRIPT",
    "S3Server",
    "missing_s3_programs",
    "running_s3_server",
    "s3_prefix",
    "s3_server",
]

S3_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "s3-server"
_STOP_TIMEOUT_S = 60.0
_KEYS = ("S3_ENDPOINT", "S3_REGION", "S3_BUCKET", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


@dataclass(frozen=True)
class S3Server:
    """Where the gateway listens, its bucket and keys, and the cluster's directory."""

    endpoint: str
    region: str
    bucket: str
    access_key_id: str
    secret_access_key: str
    directory: Path

    def halt_gateway(self) -> None:
        """Kill the gateway process (its port then refuses connections); objects stay."""
        _script("halt-gateway", self.directory)

    def resume_gateway(self) -> None:
        """Start the gateway again on the same port; returns once it answers."""
        _script("resume-gateway", self.directory)

    def settings(self, prefix: str, **changes: Any) -> S3Settings:
        """The S3 artifact backend's settings for this server's bucket under ``prefix``
        (path-style addressing, this server's keys); ``changes`` replace any field."""
        from imagebridge.artifacts.s3.objects import S3Credentials, S3Settings

        values: dict[str, Any] = {
            "bucket": self.bucket,
            "endpoint": self.endpoint,
            "region": self.region,
            "key_prefix": prefix,
            "addressing_style": "path",
            "credentials": S3Credentials(self.access_key_id, self.secret_access_key),
            **changes,
        }
        return S3Settings(**values)


def _script(command: str, directory: Path) -> None:
    subprocess.run(
        [str(S3_SCRIPT), command, str(directory)], check=True, capture_output=True, timeout=120
    )


def missing_s3_programs() -> str:
    """What is missing to run the server (``""`` when nothing is)."""
    result = subprocess.run(
        [str(S3_SCRIPT), "check"], capture_output=True, text=True, check=False, timeout=30
    )
    return "" if result.returncode == 0 else result.stdout.strip() or "scripts/s3-server check"


def _read_lines(stream: IO[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def _start_once(base: Path) -> tuple[subprocess.Popen[str], S3Server]:
    directory = base / f"cluster-{uuid.uuid4().hex[:8]}"
    log = (base / "s3-server.log").open("a")
    process = subprocess.Popen(
        [str(S3_SCRIPT), "run", str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    log.close()
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True).start()
    values: dict[str, str] = {}
    try:
        while not all(key in values for key in _KEYS):
            line = lines.get(timeout=STARTUP_S)
            if line is None:
                raise RuntimeError(f"scripts/s3-server exited early (log: {base}/s3-server.log)")
            key, _, value = line.strip().partition("=")
            values[key] = value
    except BaseException:
        _stop(process)
        raise
    return process, S3Server(
        endpoint=values["S3_ENDPOINT"],
        region=values["S3_REGION"],
        bucket=values["S3_BUCKET"],
        access_key_id=values["AWS_ACCESS_KEY_ID"],
        secret_access_key=values["AWS_SECRET_ACCESS_KEY"],
        directory=directory,
    )


def _stop(process: subprocess.Popen[str]) -> None:
    """Close the script's standard input (it stops the daemons and removes its directory)."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    try:
        process.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.terminate()
        process.wait(timeout=_STOP_TIMEOUT_S)


@contextlib.contextmanager
def running_s3_server() -> Iterator[S3Server]:
    """Start a private cluster; stop it and remove its files on exit.

    A start that fails (another program took a port between the pick and the bind) is
    tried again with new ports, three times in all.
    """
    base = Path(tempfile.mkdtemp(prefix="imagebridge-s3-"))
    try:
        for attempt in range(3):
            try:
                process, server = _start_once(base)
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        try:
            yield server
        finally:
            _stop(process)
            if server.directory.exists():
                raise RuntimeError(f"scripts/s3-server left {server.directory} behind")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    missing = missing_s3_programs()
    if missing:
        pytest.skip(f"no S3 server: Ceph RADOS Gateway is not installed ({missing})")
    with running_s3_server() as server:
        yield server


@pytest.fixture
def s3_prefix() -> str:
    """A key prefix no other test uses (ends with ``/``)."""
    return f"t-{uuid.uuid4().hex[:16]}/"
