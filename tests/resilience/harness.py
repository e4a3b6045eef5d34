"""Real servers for the resilience suite: in-thread uvicorn, or a separate process.

* :func:`start_in_thread` serves the app built from configuration ``sets`` with uvicorn in a
  background thread on a free ``127.0.0.1`` port (cheap enough to start one per case).
* :class:`ServerProcess` runs the server as a child process (``python -m
  imagebridge.server`` or this package's :mod:`tests.resilience.serve_debug` launcher), so
  its RSS, peak RSS, file descriptors, threads and children can be read from ``/proc``.

Plus the client-side helpers every test here needs: reading an SSE stream into events,
polling a job to a terminal state and reading a provider's breaker from diagnostics.
Everything listens on and connects to loopback only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import uvicorn

from tests.support.waiting import STARTUP_S, wait_until

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
MOCK_ONLY: Final = (
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
    "providers.codex_images.enabled=false",
)
TERMINAL_JOB_STATES: Final = frozenset({"succeeded", "failed", "cancelled", "interrupted"})


# -- in-thread server ----------------------------------------------------------------------


@dataclass
class ThreadServer:
    """A uvicorn server in a thread; :meth:`stop` drains it (bounded)."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread
    data_dir: Path
    app: Any

    def client(self, **kwargs: Any) -> httpx.Client:
        kwargs.setdefault("timeout", 30.0)
        return httpx.Client(base_url=self.url, **kwargs)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        assert not self.thread.is_alive(), "server did not stop"


def start_in_thread(
    data_dir: Path,
    sets: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    readiness_interval: float = 30.0,
) -> ThreadServer:
    """Serve the configuration ``MOCK_ONLY + sets`` on a free loopback port."""
    from imagebridge.config import load_config
    from imagebridge.server import ServerOptions, create_app
    from imagebridge.server.serve import uvicorn_config

    data_dir.mkdir(parents=True, exist_ok=True)
    environ = {"IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir), **(env or {})}
    loaded = load_config(env=environ, sets=[*MOCK_ONLY, *sets], cwd=data_dir)
    config = loaded.require_valid()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    options = ServerOptions(
        listener=("127.0.0.1", port), env=environ, readiness_interval=readiness_interval
    )
    app = create_app(config, origins=loaded.origins, options=options)
    server = uvicorn.Server(uvicorn_config(app, config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    if not wait_until(lambda: server.started or not thread.is_alive(), STARTUP_S):
        raise RuntimeError("server did not start")
    if not server.started:
        raise RuntimeError("server failed to start")
    return ThreadServer(f"http://127.0.0.1:{port}", server, thread, data_dir, app)


# -- server as a child process -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """What ``/proc`` says about the server process at one moment."""

    rss_bytes: int
    peak_rss_bytes: int
    fds: int
    threads: int
    children: int


def _status_kib(status: str, key: str) -> int:
    match = re.search(rf"^{key}:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else 0


class ServerProcess:
    """The bridge as a child process on ``127.0.0.1``, its stderr drained into a ring."""

    def __init__(
        self,
        data_dir: Path,
        sets: Sequence[str],
        *,
        module: str = "imagebridge.server",
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        environ = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEGEN_BRIDGE")}
        environ.update({"IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir), **(env or {})})
        environ["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT), *filter(None, [environ.get("PYTHONPATH")])]
        )
        args = [sys.executable, "-m", module, "--bind", "127.0.0.1:0", *extra_args]
        for item in [*MOCK_ONLY, *sets]:
            args += ["--set", item]
        self.data_dir = data_dir
        self.process = subprocess.Popen(
            args,
            cwd=data_dir,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        self._lines: queue.Queue[str] = queue.Queue()
        self.stderr_tail: list[str] = []
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        self.url = self._await_url()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._lines.put(line)
            self.stderr_tail.append(line)
            del self.stderr_tail[:-200]

    def _await_url(self) -> str:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if match:
                return match.group(1)
        self.stop()
        raise RuntimeError("server process did not start:\n" + "".join(self.stderr_tail[-20:]))

    def sample(self) -> ProcessSample:
        proc = Path("/proc") / str(self.pid)
        status = (proc / "status").read_text()
        return ProcessSample(
            rss_bytes=_status_kib(status, "VmRSS"),
            peak_rss_bytes=_status_kib(status, "VmHWM"),
            fds=len(os.listdir(proc / "fd")),
            threads=len(os.listdir(proc / "task")),
            children=len(self.child_pids()),
        )

    def child_pids(self) -> list[int]:
        found: list[int] = []
        for task in (Path("/proc") / str(self.pid) / "task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(pid) for pid in (task / "children").read_text().split()]
        return found

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM (graceful drain), then SIGKILL after ``timeout``; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._drainer.join(timeout=5)
        return self.process.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- client-side helpers -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SseFrame:
    event: str
    data: Any


def parse_sse(lines: Iterable[str]) -> list[SseFrame]:
    """The ``event:``/``data:`` frames of a stream (comments skipped, data parsed as JSON)."""
    frames: list[SseFrame] = []
    event: str | None = None
    data: list[str] = []
    for line in lines:
        if line == "":
            if event is not None or data:
                frames.append(SseFrame(event or "message", json.loads("\n".join(data))))
            event, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if event is not None or data:
        frames.append(SseFrame(event or "message", json.loads("\n".join(data))))
    return frames


def poll_job(client: httpx.Client, job_id: str, timeout: float = 30.0) -> dict[str, Any]:
    """GET the job until it is terminal (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").raise_for_status().json()
        if job["status"] in TERMINAL_JOB_STATES or time.monotonic() > deadline:
            return job
        time.sleep(0.02)


def breakers(client: httpx.Client) -> dict[str, dict[str, Any]]:
    """``runtime.circuit_breakers`` from ``/v1/diagnostics/extended`` (an imagebridge addition)."""
    body = client.get("/v1/diagnostics/extended").raise_for_status().json()
    return dict(body["runtime"]["circuit_breakers"])


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1) of a non-empty sample."""
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(q * len(ordered))))
    return ordered[rank - 1]


@dataclass
class Table:
    """A plain-text table, printed with ``-s`` and written under ``test-output/``."""

    headers: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(cell) for cell in cells])

    def render(self) -> str:
        widths = [len(h) for h in self.headers]
        for row in self.rows:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        line = " | ".join(h.ljust(w) for h, w in zip(self.headers, widths, strict=True))
        out = [line, "-+-".join("-" * w for w in widths)]
        out += [
            " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in self.rows
        ]
        return "\n".join(out) + "\n"

    def publish(self, name: str, title: str) -> Path:
        text = f"{title}\n\n{self.render()}"
        target = REPO_ROOT / "test-output" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"\n{text}")
        return target


__all__ = [
    "MOCK_ONLY",
    "REPO_ROOT",
    "TERMINAL_JOB_STATES",
    "ProcessSample",
    "ServerProcess",
    "SseFrame",
    "Table",
    "ThreadServer",
    "breakers",
    "parse_sse",
    "percentile",
    "poll_job",
    "start_in_thread",
    "wait_until",
]
