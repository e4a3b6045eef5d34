"""A real reverse proxy in front of bridges: Debian's nginx, started by a test on 127.0.0.1.

:func:`nginx_proxy` writes a configuration into a temporary prefix (its pid file, logs and
temporary directories live there too) and runs ``nginx -g 'daemon off;'`` on a free
loopback port, proxying every path to one or more bridge upstreams (round robin, so
successive requests alternate between them: ``max_fails=0``, so a timed-out upstream is
not set aside). Its read timeout is the one a real deployment sets, and everything else is
nginx's default: response buffering on (the bridge's ``X-Accel-Buffering: no`` turns it off
for streams), no retry of a ``POST`` on another upstream. Its access log records each
answer's status and upstream (:meth:`NginxProxy.answers`). The process is stopped when the
``with`` block ends.

``nginx_binary()`` is ``None`` when nginx is not installed (``scripts/install-test-deps``
installs Debian's ``nginx-light``); tests then skip and say so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.waiting import STARTUP_S

LOG_WAIT_S = 10.0
"""How long :meth:`NginxProxy.answers` waits for the log lines a test expects."""

__all__ = ["NginxProxy", "nginx_binary", "nginx_proxy", "require_nginx"]

_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx")


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    if found is not None:
        return found
    return next((path for path in _CANDIDATES if os.access(path, os.X_OK)), None)


def require_nginx() -> str:
    binary = nginx_binary()
    if binary is None:
        pytest.skip("nginx is not installed (scripts/install-test-deps installs nginx-light)")
    return binary


@dataclass(frozen=True)
class NginxProxy:
    url: str
    prefix: Path

    def error_log(self) -> str:
        path = self.prefix / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def access_log(self) -> list[str]:
        path = self.prefix / "access.log"
        return path.read_text(errors="replace").splitlines() if path.exists() else []

    def answers(
        self, *, at_least: int = 1, ending_with: int | None = None
    ) -> list[tuple[int, str]]:
        """``(status, upstream address)`` of each request nginx answered, in order (the
        upstream is ``-`` when none was reached).

        nginx writes a request's log line after its answer went out, so a client can hold
        the answer before the line is there: wait (at most ``LOG_WAIT_S``) for ``at_least``
        lines, the last one ``ending_with`` that status when given. What is logged by then is
        returned either way, for the test to judge.
        """
        deadline = time.monotonic() + LOG_WAIT_S
        while True:
            found = []
            for line in self.access_log():
                status, upstream = line.split(" ", 2)[:2]
                found.append((int(status), upstream))
            settled = len(found) >= at_least and (
                ending_with is None or (bool(found) and found[-1][0] == ending_with)
            )
            if settled or time.monotonic() > deadline:
                return found
            time.sleep(0.05)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(prefix: Path, port: int, upstreams: Sequence[str], read_timeout_s: int) -> str:
    servers = "\n".join(f"        server {urlsplit(url).netloc} max_fails=0;" for url in upstreams)
    temp = "\n".join(
        f"    {name}_temp_path {prefix / name};"
        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""
worker_processes 1;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} info;
events {{ worker_connections 256; }}
http {{
    log_format answers '$status $upstream_addr "$request"';
    access_log {prefix / "access.log"} answers;
{temp}
    client_max_body_size 100m;
    client_body_buffer_size 16m;
    upstream bridges {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://bridges;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_read_timeout {read_timeout_s}s;
            proxy_send_timeout {read_timeout_s}s;
        }}
    }}
}}
"""


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False


@contextlib.contextmanager
def nginx_proxy(
    prefix: Path, upstreams: Sequence[str], *, read_timeout_s: int = 5
) -> Iterator[NginxProxy]:
    """nginx on a free loopback port in front of ``upstreams`` (bridge base URLs)."""
    binary = require_nginx()
    prefix.mkdir(parents=True, exist_ok=True)
    prefix.chmod(0o755)  # a root master's workers run as another user
    port = _free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(_config(prefix, port, upstreams, read_timeout_s))
    process = subprocess.Popen(
        [binary, "-p", str(prefix), "-c", str(conf), "-g", "daemon off;"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + STARTUP_S
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                stderr = process.stderr.read() if process.stderr is not None else ""
                raise RuntimeError(f"nginx did not start: {stderr}")
            time.sleep(0.02)
        yield NginxProxy(url=f"http://127.0.0.1:{port}", prefix=prefix)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGQUIT)  # graceful: finish, then exit
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
