"""A bounded ring buffer for the child's stderr and the redaction applied before logging it.

codex writes diagnostics (and, on some errors, request details) to stderr. The bridge must
drain the pipe continuously — a full pipe would freeze the child — but must never keep it
all, never hand it to clients, and never log secrets from it.
"""

from __future__ import annotations

import re

__all__ = ["StderrRing", "redact"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_SECRETS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;]+"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
    re.compile(r"\b(?:sk|rt|pk|sess)[-_][A-Za-z0-9_-]{8,}"),
    re.compile(
        r"(?i)(\"?(?:access_token|refresh_token|id_token|api_key|authorization|password|"
        r"secret|token)\"?\s*[:=]\s*)(\"[^\"]*\"|[^\s,;]+)"
    ),
    re.compile(r"[A-Za-z0-9+/=_-]{64,}"),
)


def redact(text: str) -> str:
    """Remove terminal colours and anything that looks like a credential or a payload."""
    text = _ANSI.sub("", text)
    for pattern in _SECRETS:
        if pattern.groups == 2:
            text = pattern.sub(lambda m: f"{m.group(1)}<redacted>", text)
        elif pattern.groups == 1:
            text = pattern.sub(lambda m: f"{m.group(1)} <redacted>", text)
        else:
            text = pattern.sub("<redacted>", text)
    return text


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
