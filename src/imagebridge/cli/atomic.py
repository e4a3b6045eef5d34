"""Atomic file writes: a temporary file in the target directory, fsync, then publish.

``replace=False`` publishes with a hard link, which fails instead of overwriting when the
name is taken (so a file created meanwhile is never clobbered); ``replace=True`` renames
over it. Readers never see a half-written file either way.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, data: bytes, *, mode: int = 0o644, replace: bool = False) -> None:
    """Write ``data`` to ``path`` atomically. Raises ``FileExistsError`` when ``path``
    exists and ``replace`` is false; other ``OSError`` on failure (nothing is left behind)."""
    directory = path.parent
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    temp = Path(temp_name)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(temp, path)
        else:
            os.link(temp, path)
        _fsync_directory(directory)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def _fsync_directory(directory: Path) -> None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
