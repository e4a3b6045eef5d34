"""JSONL framing with a hard line limit, enforced while the bytes arrive.

A line is never buffered beyond ``max_line_bytes`` (+ one read chunk): as soon as the
pending, newline-free data exceeds the limit the reader raises :class:`LineTooLong`, and
the link is considered broken. Encoding is compact UTF-8 JSON plus ``\\n``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

__all__ = ["LineTooLong", "encode_message", "read_lines"]

_CHUNK = 64 * 1024


class LineTooLong(Exception):
    """A line grew past the limit before its newline arrived."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"line of at least {size} bytes exceeds the {limit}-byte limit")
        self.size = size
        self.limit = limit


class LineReader:
    """Splits a byte stream into lines of at most ``max_line_bytes`` (newline excluded)."""

    def __init__(self, stream: asyncio.StreamReader, max_line_bytes: int) -> None:
        self._stream = stream
        self._limit = max_line_bytes
        self._buffer = bytearray()
        self._searched = 0
        self._eof = False

    async def readline(self) -> bytes | None:
        """The next line, or ``None`` at end of stream. Raises :class:`LineTooLong`."""
        while True:
            newline = self._buffer.find(b"\n", self._searched)
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                self._searched = 0
                if len(line) > self._limit:
                    raise LineTooLong(len(line), self._limit)
                return line.rstrip(b"\r")
            if len(self._buffer) > self._limit:
                raise LineTooLong(len(self._buffer), self._limit)
            if self._eof:
                if self._buffer:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return line
                return None
            self._searched = len(self._buffer)
            chunk = await self._stream.read(_CHUNK)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


def read_lines(stream: asyncio.StreamReader, max_line_bytes: int) -> LineReader:
    return LineReader(stream, max_line_bytes)


def encode_message(message: dict[str, Any]) -> bytes:
    """One JSON-RPC-lite message as a single line (no ``jsonrpc`` member, codex style)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
