"""A server process started by a benchmark: stderr drained, listening URL awaited.

Every server a benchmark starts (the bridge, a bare baseline app) announces
``listening on http://…`` on stderr. The pipe is drained by a thread so a chatty child
can never block on a full pipe.
"""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["ServerProcess", "stop_process"]

_LISTENING = re.compile(r"listening on (http://\S+)")


class ServerProcess:
    """``python ARGS…`` with its stderr drained; :meth:`url` waits for it to listen."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._lines.put(line)

    def url(self, timeout: float = 30.0) -> str:
        """The URL the server announced; ``RuntimeError`` if it exits or stays silent."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            match = _LISTENING.search(line)
            if match:
                return match.group(1)
        raise RuntimeError("the server did not start")

    def stop(self) -> None:
        stop_process(self.process)


def stop_process(process: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it is still running 30 s later."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
