"""A tiny HTTP/1.1 server on 127.0.0.1 for remote-fetch tests (one request per connection)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass
class Route:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    chunked: bool = False
    stall: bool = False


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


class LocalServer:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.seen: list[Seen] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._release = asyncio.Event()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await reader.readline()
            headers: dict[str, str] = {}
            for _ in range(100):
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            path = request_line.split(b" ")[1].decode() if request_line else ""
            self.seen.append(Seen(path, headers))
            route = self.routes.get(path, Route(status=404))
            if route.stall:
                await self._release.wait()
                return
            head = [f"HTTP/1.1 {route.status} X", "Connection: close"]
            head += [f"{k}: {v}" for k, v in route.headers.items()]
            if route.chunked:
                head.append("Transfer-Encoding: chunked")
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
                for start in range(0, len(route.body), 4096):
                    piece = route.body[start : start + 4096]
                    writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                writer.write(b"0\r\n\r\n")
            else:
                if not any(k.lower() == "content-length" for k in route.headers):
                    head.append(f"Content-Length: {len(route.body)}")
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + route.body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def __aenter__(self) -> LocalServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()


@contextlib.asynccontextmanager
async def local_server() -> AsyncIterator[LocalServer]:
    async with LocalServer() as server:
        yield server
