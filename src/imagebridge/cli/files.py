"""Bounded reads of the files and streams a command is pointed at.

Every read stops one byte past its limit, so an oversized file or an endless pipe is
refused without being read into memory. ``-`` means standard input.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import BinaryIO

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["read_bounded", "read_prompt_stream"]

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _input_error(message: str, **details: object) -> BridgeError:
    return BridgeError(ErrorCode.INPUT, message, details=details or None)


def _read_stream(stream: BinaryIO, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = stream.read(min(1024 * 1024, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_bounded(path: str, limit: int, what: str, *, stdin: BinaryIO | None = None) -> bytes:
    """The bytes of ``path`` (``-``: stdin), refusing more than ``limit`` bytes.

    A file must be a regular file (a FIFO or device could block or never end).
    """
    if path == "-":
        data = _read_stream(stdin if stdin is not None else sys.stdin.buffer, limit)
    else:
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except FileNotFoundError:
            raise _input_error(f"{what} does not exist", path=path) from None
        except OSError as exc:
            raise _input_error(f"{what} cannot be opened", path=path, reason=exc.strerror) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _input_error(f"{what} is not a regular file", path=path)
            if info.st_size > limit:
                raise _input_error(
                    f"{what} exceeds the configured byte limit", path=path, max_bytes=limit
                )
            with os.fdopen(fd, "rb", closefd=False) as stream:
                data = _read_stream(stream, limit)
        except OSError as exc:
            raise _input_error(f"{what} cannot be read", path=path, reason=exc.strerror) from None
        finally:
            os.close(fd)
    if len(data) > limit:
        raise _input_error(f"{what} exceeds the configured byte limit", max_bytes=limit)
    return data


def read_prompt_stream(stream: BinaryIO, limit: int) -> str:
    """A prompt from stdin: at most ``limit`` UTF-8 bytes once one final newline is dropped."""
    data = _read_stream(stream, limit + 2)
    if data.endswith(b"\r\n"):
        data = data[:-2]
    elif data.endswith(b"\n"):
        data = data[:-1]
    if len(data) > limit:
        raise _input_error(
            "prompt from stdin exceeds the configured byte limit",
            field="prompt",
            max_bytes=limit,
        ).with_suggestion("Shorten the prompt or raise runtime.request.max_prompt_bytes.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _input_error("prompt from stdin is not valid UTF-8", field="prompt") from None
