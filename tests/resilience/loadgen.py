"""A lean HTTP/1.1 load generator, run as its own process (like wrk, in Python).

The load test must measure the bridge, not its client. httpx costs milliseconds of CPU per
request and the pytest process carries the whole suite's heap, so on a 2-core machine the
generator itself became the bottleneck. This module speaks keep-alive HTTP/1.1 over plain
asyncio streams (one connection per worker), runs in a fresh interpreter, and prints one
JSON document with every outcome.

Usage: ``python -m tests.resilience.loadgen URL TOTAL CONCURRENCY RAMP_S BODY_JSON``
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any
from urllib.parse import urlsplit

_READ_TIMEOUT_S = 60.0


async def _connect(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(host, port)


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, dict[str, str], bytes]:
    writer.write(request)
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await asyncio.wait_for(reader.readexactly(length), _READ_TIMEOUT_S)
    return status, headers, body


async def drive(
    url: str, total: int, concurrency: int, ramp_s: float, body: bytes
) -> list[dict[str, Any]]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    request = (
        f"POST /v1/images HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    outcomes: list[dict[str, Any]] = []
    pending = iter(range(total))

    async def worker(index: int) -> None:
        await asyncio.sleep(ramp_s * index / concurrency)
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        for _ in pending:
            started = time.perf_counter()
            try:
                if connection is None:
                    connection = await _connect(host, port)
                status, headers, payload = await _exchange(*connection, request)
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:
                outcomes.append({"status": type(exc).__name__, "seconds": 0.0})
                if connection is not None:
                    connection[1].close()
                connection = None
                continue
            seconds = time.perf_counter() - started
            outcome: dict[str, Any] = {"status": status, "seconds": seconds}
            if status != 200:
                native = json.loads(payload)["error"]["imagegen_bridge"]
                outcome["code"] = native["code"]
                outcome["limit"] = native.get("details", {}).get("limit")
                outcome["retry_after"] = headers.get("retry-after")
            outcomes.append(outcome)
            if headers.get("connection", "").lower() == "close":
                connection[1].close()
                connection = None
        if connection is not None:
            connection[1].close()

    await asyncio.gather(*(worker(index) for index in range(concurrency)))
    return outcomes


def main(argv: list[str]) -> int:
    url, total, concurrency, ramp_s, body = argv
    outcomes = asyncio.run(drive(url, int(total), int(concurrency), float(ramp_s), body.encode()))
    json.dump(outcomes, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
