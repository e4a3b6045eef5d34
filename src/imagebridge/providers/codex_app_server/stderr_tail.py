"""A bounded ring buffer for the child's stderr and the redaction applied before logging it.

codex writes diagnostics (and, on some errors, request details) to stderr. The bridge must
drain the pipe continuously — a full pipe would freeze the child — but must never keep it
all, never hand it to clients, and never log secrets from it.
"""

from __future__ import annotations

from imagebridge.providers.shared import redact

__all__ = ["StderrRing", "redact"]


class StderrRing:
    """Keeps only the last ``capacity`` bytes written; counts everything it dropped."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self._capacity = capacity
        self._buffer = bytearray()
        self.total_bytes = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    def write(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        if len(chunk) >= self._capacity:
            self._buffer[:] = chunk[-self._capacity :]
            return
        self._buffer += chunk
        overflow = len(self._buffer) - self._capacity
        if overflow > 0:
            del self._buffer[:overflow]

    def __len__(self) -> int:
        return len(self._buffer)

    def tail(self, max_bytes: int = 2048) -> str:
        """The last ``max_bytes`` as redacted text, starting at a line boundary when possible."""
        data = bytes(self._buffer[-max_bytes:]) if max_bytes > 0 else b""
        if len(self._buffer) > max_bytes:
            newline = data.find(b"\n")
            if 0 <= newline < len(data) - 1:
                data = data[newline + 1 :]
        return redact(data.decode("utf-8", errors="replace")).strip()
