"""One bridge server process on SQLite and a data directory, and checks of what it leaves.

:func:`start_server` runs ``python -m imagebridge.server`` on ``127.0.0.1`` with a random
port and only the offline ``mock`` provider, its artifacts, jobs and presets under
``data_dir``, and returns once it announces its URL. :func:`data_dir_problems` lists what a
crash could have left wrong there: a file no ownership marker owns, a marker naming a
missing file or sidecar, a leftover temp file, a database that does not verify, a job row
left ``running``. Used by the crash-step tests and the full-disk test (which runs it inside
its own mount namespace, so it must not import pytest).
"""

from __future__ import annotations

import contextlib
import hashlib
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.waiting import STARTUP_S

__all__ = [
    "MOCK_ONLY",
    "ServerProcess",
    "backdate_temp_files",
    "data_dir_problems",
    "spawn_bridge",
    "start_server",
]

_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")
OWNERSHIP = ".imagegen-bridge-ownership"
TEMP_PREFIX = ".imagegen-bridge-tmp-"
MOCK_ONLY = (
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
    "providers.codex_images.enabled=false",
    "server.tracing.enabled=false",
)


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    url: str
    output: list[str] = field(default_factory=list)

    def wait_dead(self, timeout: float = 60.0) -> int:
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 20.0) -> int:
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


def server_sets(data_dir: Path) -> list[str]:
    return [
        *MOCK_ONLY,
        f'artifacts.root="{data_dir / "artifacts"}"',
        f'server.jobs.database="{data_dir / "jobs.sqlite3"}"',
    ]


def spawn_bridge(
    data_dir: Path,
    sets: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    drop_env: tuple[str, ...] = ("IMAGEGEN_BRIDGE",),
    timeout: float = STARTUP_S,
) -> tuple[subprocess.Popen[str], str, list[str]]:
    """``python -m imagebridge.server --set …`` on a free loopback port, in ``data_dir``,
    without the environment variables named by ``drop_env`` and with ``env``; returns the
    process, the URL it announced and the list its last stderr lines are kept in."""
    data_dir.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "imagebridge.server", "--bind", "127.0.0.1:0"]
    for item in sets:
        args += ["--set", item]
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(drop_env)}
    child_env.update(
        {"IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1", **(env or {})}
    )
    process = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env,
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
                return process, match.group(1), output
            continue
        # The output ended (the process is exiting) or the time is up.
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(timeout=10)
        raise RuntimeError("bridge did not start:\n" + "\n".join(output[-20:]))


def start_server(
    data_dir: Path,
    *sets: str,
    env: Mapping[str, str] | None = None,
    timeout: float = STARTUP_S,
) -> ServerProcess:
    process, url, output = spawn_bridge(
        data_dir, [*server_sets(data_dir), *sets], env=env, timeout=timeout
    )
    return ServerProcess(process, url, output)


def backdate_temp_files(root: Path, seconds: float) -> int:
    """Age every crash-leftover temp file below ``root`` by ``seconds`` (past the grace)."""
    count = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.startswith(TEMP_PREFIX):
                path = Path(dirpath) / name
                info = path.stat()
                os.utime(path, (info.st_atime - seconds, info.st_mtime - seconds))
                count += 1
    return count


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def artifact_problems(root: Path) -> list[str]:
    """Unowned files, markers naming missing or changed files, leftover temp files."""
    problems: list[str] = []
    owned: set[str] = set()
    own_dir = root / OWNERSHIP
    for marker_path in sorted(own_dir.iterdir()) if own_dir.is_dir() else []:
        if marker_path.name.startswith(TEMP_PREFIX):
            problems.append(f"temp file {OWNERSHIP}/{marker_path.name}")
            continue
        try:
            marker = json.loads(marker_path.read_text())
        except (OSError, ValueError):
            problems.append(f"unreadable marker {marker_path.name}")
            continue
        target = root / marker["name"]
        if not target.is_file():
            problems.append(f"marker {marker_path.name} names missing {marker['name']}")
        elif _sha256(target) != marker["sha256"]:
            problems.append(f"marker {marker_path.name}: {marker['name']} changed")
        owned.add(marker["name"])
        sidecar = marker.get("sidecar_name")
        if sidecar is not None:
            owned.add(sidecar)
            if not (root / sidecar).is_file():
                problems.append(f"marker {marker_path.name} names missing sidecar {sidecar}")
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != OWNERSHIP]
        for name in files:
            relative = os.path.relpath(os.path.join(dirpath, name), root)
            if name.startswith(TEMP_PREFIX):
                problems.append(f"temp file {relative}")
            elif relative not in owned:
                problems.append(f"unowned file {relative}")
    return problems


def database_problems(path: Path) -> list[str]:
    """``PRAGMA integrity_check`` and job rows left ``running`` (read-only, no side files
    beyond SQLite's own)."""
    if not path.exists():
        return []
    problems: list[str] = []
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        result = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if result != "ok":
            problems.append(f"integrity_check: {result}")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "image_jobs" in tables:
            running = conn.execute(
                "SELECT COUNT(*) FROM image_jobs WHERE status = 'running'"
            ).fetchone()[0]
            if running:
                problems.append(f"{running} job rows left running")
    finally:
        conn.close()
    return problems


def data_dir_problems(data_dir: Path) -> list[str]:
    return [
        *artifact_problems(data_dir / "artifacts"),
        *database_problems(data_dir / "jobs.sqlite3"),
    ]
