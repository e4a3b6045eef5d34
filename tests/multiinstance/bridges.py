"""Bridge server processes for multi-instance tests and the multi-instance benchmark.

:func:`start_bridge` runs ``python -m imagebridge.server`` on ``127.0.0.1`` with a random
port, in shared mode on a PostgreSQL database (the password travels in an environment
variable, never on the command line), and returns once it announces its URL.
:class:`BridgeProcess` can stop it gracefully or ``kill -9`` it. Every process started here
is stopped by :func:`bridge_processes` when its ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "PASSWORD_ENV",
    "BridgeProcess",
    "SharedDatabase",
    "bridge_processes",
    "start_bridge",
]

PASSWORD_ENV = "MULTI_INSTANCE_PG_PASSWORD"
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")
_MOCK_ONLY = (
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
    "providers.codex_images.enabled=false",
    "server.tracing.enabled=false",
)


@dataclass(frozen=True)
class SharedDatabase:
    """Where every instance keeps its jobs: a password-free URL, a schema, the password."""

    url: str
    schema: str
    password: str

    def sets(self) -> list[str]:
        return [
            f'server.jobs.database="{self.url}"',
            f'server.jobs.postgres_schema="{self.schema}"',
            f'server.jobs.postgres_password_env="{PASSWORD_ENV}"',
        ]


@dataclass
class BridgeProcess:
    name: str
    process: subprocess.Popen[str]
    url: str
    output: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """``kill -9``: no shutdown, no last words to the database."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, then SIGKILL if it has not stopped within ``timeout``."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return int(self.process.returncode)


def _pump(stream: Iterable[str], lines: queue.Queue[str | None], keep: list[str]) -> None:
    for line in stream:
        keep.append(line.rstrip("\n"))
        del keep[:-200]
        lines.put(line)
    lines.put(None)


def start_bridge(
    name: str,
    database: SharedDatabase,
    data_dir: Path,
    *sets: str,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> BridgeProcess:
    """Start one instance named ``name`` (its ``server.jobs.instance_id``); ``env`` adds
    variables (the S3 keys a ``*_env`` setting names)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "imagebridge.server", "--bind", "127.0.0.1:0"]
    for item in (*_MOCK_ONLY, *database.sets(), f'server.jobs.instance_id="{name}"', *sets):
        args += ["--set", item]
    extra = dict(env or {})
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("IMAGEGEN_BRIDGE", "PG"))
    }
    env.update(extra)
    env.update(
        {
            "IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir),
            PASSWORD_ENV: database.password,
            "PYTHONUNBUFFERED": "1",
        }
    )
    process = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=data_dir,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []
    threading.Thread(target=_pump, args=(process.stderr, lines, output), daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            line = ""  # timed out
        if line:
            match = _LISTENING.search(line)
            if match:
                return BridgeProcess(name, process, match.group(1), output)
            continue
        # The output ended (the process is exiting) or the time is up.
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(timeout=10)
        raise RuntimeError(f"bridge {name} did not start:\n" + "\n".join(output[-20:]))


@contextlib.contextmanager
def bridge_processes() -> Iterator[list[BridgeProcess]]:
    """A list to put started bridges in; each is stopped (or killed) on exit."""
    started: list[BridgeProcess] = []
    try:
        yield started
    finally:
        for bridge in started:
            bridge.stop(timeout=10)
