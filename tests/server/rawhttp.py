"""A raw HTTP/1.1 client over a socket, for tests that must disconnect mid-request."""

from __future__ import annotations

import json
import socket
from typing import Any

from tests.support.images import png_bytes


def open_request(
    port: int,
    path: str,
    body: Any,
    *,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> socket.socket:
    """Send a POST and return the open socket (the caller reads or closes it)."""
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(payload)}",
        *(f"{key}: {value}" for key, value in (headers or {}).items()),
    ]
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
    return sock


def read_until(sock: socket.socket, marker: bytes, limit: int = 1 << 20) -> bytes:
    """Read until ``marker`` appears (bounded by ``limit`` bytes and the socket timeout)."""
    received = b""
    while marker not in received and len(received) < limit:
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


BOUNDARY = "bridge-test-boundary"


def multipart_edit(prompt: str) -> bytes:
    """A multipart ``/v1/images/edits`` body: ``prompt``, an 8×8 size and one 8×8 PNG."""
    return (
        (
            f"--{BOUNDARY}\r\n"
            'Content-Disposition: form-data; name="prompt"\r\n\r\n'
            f"{prompt}\r\n"
            f"--{BOUNDARY}\r\n"
            'Content-Disposition: form-data; name="size"\r\n\r\n8x8\r\n'
            f"--{BOUNDARY}\r\n"
            'Content-Disposition: form-data; name="image"; filename="a.png"\r\n'
            "Content-Type: image/png\r\n\r\n"
        ).encode()
        + png_bytes(8, 8, (200, 30, 30))
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
