"""A webhook receiver on 127.0.0.1 that verifies every request with the ``openai`` SDK.

:class:`Receiver` listens on a fixed loopback port (chosen at creation), so it can be
stopped ("down": connections are refused) and started again at the same URL. ``answer``
decides each request's fate from its arrival number: an HTTP status and a delay before
answering (longer than the bridge's timeout = "slow"). Every request is recorded with its
headers and body and whether ``openai.OpenAI(webhook_secret=…).webhooks.unwrap`` accepted
it; :meth:`Receiver.accepted` maps each ``webhook-id`` answered 2xx to its event.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai

__all__ = ["Received", "Receiver", "free_port"]

Answer = Callable[[int], tuple[int, float]]
"""Request number (0-based) → (HTTP status, seconds to wait before answering)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@functools.cache
def _hooks() -> Any:
    """One SDK client for every check (making one costs milliseconds: a TLS context)."""
    return openai.OpenAI(api_key="unused").webhooks


def always_ok(_: int) -> tuple[int, float]:
    return 204, 0.0


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int
    verified: bool
    event: dict[str, Any] | None

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


@dataclass
class Receiver:
    secret: str | None = None
    answer: Answer = always_ok
    port: int = field(default_factory=free_port)
    requests: list[Received] = field(default_factory=list)
    arrived: list[str] = field(default_factory=list)
    """``webhook-id`` of each request as it arrived (``requests`` fill in once answered)."""
    _server: http.server.ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/bridge"

    def start(self) -> Receiver:
        receiver = self
        _hooks()  # build the SDK client (and import its modules) before the first request

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    status, delay = receiver.answer(len(receiver.arrived))
                    receiver.arrived.append(headers.get("webhook-id", ""))
                time.sleep(delay)
                with contextlib.suppress(OSError):
                    self.send_response(status)
                    self.send_header("content-length", "0")
                    self.end_headers()
                checked = receiver._check(headers, body, status)  # after answering: untimed
                with receiver._lock:
                    receiver.requests.append(checked)

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        return self

    def stop(self) -> None:
        """Down: the port refuses connections until :meth:`start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _check(self, headers: dict[str, str], body: bytes, status: int) -> Received:
        event: dict[str, Any] | None = None
        verified = False
        if self.secret is not None:
            try:
                unwrapped = _hooks().unwrap(body, headers, secret=self.secret)
            except Exception:
                verified = False
            else:
                verified = True
                event = json.loads(body)
                assert unwrapped.id == event["id"]
        return Received(headers, body, status, verified, event)

    def snapshot(self, timeout: float = 10.0) -> list[Received]:
        """Every request so far, once each one that arrived has been answered and checked."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if len(self.requests) == len(self.arrived) or time.monotonic() > deadline:
                    return list(self.requests)
            time.sleep(0.01)

    def accepted(self) -> dict[str, dict[str, Any]]:
        """``webhook-id`` → event, for the requests answered 2xx."""
        return {
            item.webhook_id: item.event or json.loads(item.body)
            for item in self.snapshot()
            if 200 <= item.status < 300
        }
