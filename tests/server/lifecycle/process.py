"""A served bridge as a real process (``python -m imagebridge.server``), for the tests of
its start, log and stop (lifecycle/test_serve.py, test_shutdown.py) and of a database that
is late at its start (storage/test_database_startup.py)."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.support.waiting import STARTUP_S

MOCK_ONLY = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
]
"""The ``--set`` overrides that leave only the offline mock provider on."""


class Process:
    """``python -m imagebridge.server`` as a child; its stderr (the JSON log) read line by
    line on a thread."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "imagebridge.server", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.lines.put(line.rstrip("\n"))

    def wait_line(self, pattern: str, timeout: float = STARTUP_S) -> re.Match[str]:
        """The first line matching ``pattern`` (a line a starting server writes comes within
        :data:`STARTUP_S`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.popen.poll() is not None and self.lines.empty():
                    break
                continue
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match
        raise AssertionError(f"no line matching {pattern!r}; saw {self.seen}")

    def drain(self) -> list[str]:
        while True:
            try:
                self.seen.append(self.lines.get(timeout=0.2))
            except queue.Empty:
                return self.seen
