"""Files, the filesystem backend's objects: directory-fd primitives that never follow a symlink.

What the store writes through (its S3 twin's ``objects.py`` is the bucket). Every path
below a trusted directory is walked one component at a time with ``O_NOFOLLOW``, so a
directory swapped for a symlink between checks cannot redirect a read, write or delete
outside the root. Files are published with a temporary file, ``fsync`` and ``link``
(which refuses to overwrite), never by renaming over a name. The input loader
(:mod:`imagebridge.artifacts.inputs.loader`) reads local files and the link key
(:mod:`.links`) is kept with the same primitives.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "TEMP_PREFIX",
    "PathState",
    "Unsafe",
    "entry_state",
    "fsync_dir",
    "is_temp_name",
    "link_noclobber",
    "locked",
    "open_child_dir",
    "open_dir",
    "open_parent",
    "open_relative_dir",
    "read_regular",
    "remove_quietly",
    "replace_atomically",
    "taken",
    "write_temp",
]

TEMP_PREFIX = ".imagegen-bridge-tmp-"
_TEMP_TOKEN_BYTES = 12
_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + f"[0-9a-f]{{{2 * _TEMP_TOKEN_BYTES}}}")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Unsafe(Exception):
    """A path component was a symlink or not what it had to be (internal signal)."""


class PathState(Enum):
    MISSING = "missing"
    REGULAR = "regular"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class EntryState:
    state: PathState
    size: int = 0


def open_dir(path: str) -> int:
    """Open a trusted directory path (its last component must not be a symlink)."""
    return os.open(path, _DIR_FLAGS)


def open_child_dir(parent_fd: int, name: str, *, create: bool = False) -> int:
    """Open (optionally create) ``name`` below ``parent_fd``; symlinks and files are unsafe."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, dir_fd=parent_fd)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise Unsafe(name) from exc
        raise


@contextlib.contextmanager
def open_parent(root_fd: int, relative: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
    """Yield ``(fd of the parent directory, basename)`` for a ``/``-separated name."""
    *directories, basename = relative.split("/")
    fd = os.dup(root_fd)
    try:
        for component in directories:
            child = open_child_dir(fd, component, create=create)
            os.close(fd)
            fd = child
        yield fd, basename
    finally:
        os.close(fd)


def open_relative_dir(root_fd: int, relative: str) -> int:
    """Open the directory ``relative`` (``""`` is ``root_fd`` itself) without symlinks."""
    fd = os.dup(root_fd)
    try:
        for component in relative.split("/") if relative else ():
            child = open_child_dir(fd, component)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def entry_state(root_fd: int, relative: str) -> EntryState:
    """Whether ``relative`` is a regular file reached without symlinks, missing, or neither."""
    try:
        with open_parent(root_fd, relative) as (parent, basename):
            info = os.stat(basename, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return EntryState(PathState.MISSING)
    except (Unsafe, OSError):
        return EntryState(PathState.INVALID)
    if stat.S_ISREG(info.st_mode):
        return EntryState(PathState.REGULAR, info.st_size)
    return EntryState(PathState.INVALID)


def read_regular(parent_fd: int, basename: str, limit: int) -> bytes:
    """Read a regular file of at most ``limit`` bytes (never a FIFO, device or symlink)."""
    try:
        fd = os.open(basename, _READ_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Unsafe(basename) from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise Unsafe(basename)
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Unsafe(basename)
    return data


def write_temp(dir_fd: int, data: bytes, mode: int) -> str:
    """Write ``data`` to a new hidden temp file in ``dir_fd`` and fsync it; return its name."""
    name = TEMP_PREFIX + secrets.token_hex(_TEMP_TOKEN_BYTES)
    fd = os.open(name, _WRITE_FLAGS, mode, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        remove_quietly(dir_fd, name)
        raise
    os.close(fd)
    return name


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is exactly what :func:`write_temp` creates (nothing else matches)."""
    return _TEMP_NAME.fullmatch(name) is not None


def taken(dir_fd: int, name: str) -> bool:
    """Whether anything (or something unreadable) already has ``name`` in ``dir_fd``."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


def link_noclobber(dir_fd: int, temp_name: str, name: str) -> bool:
    """Give ``temp_name`` the name ``name``; ``False`` if ``name`` already exists."""
    try:
        os.link(temp_name, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        return False
    return True


def replace_atomically(dir_fd: int, temp_name: str, name: str) -> None:
    """Atomically swap ``temp_name`` into ``name`` (used only for ownership markers)."""
    os.replace(temp_name, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def fsync_dir(dir_fd: int) -> None:
    os.fsync(dir_fd)


def remove_quietly(dir_fd: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


@contextlib.contextmanager
def locked(dir_fd: int, *, exclusive: bool) -> Iterator[None]:
    """Hold ``flock`` on a directory: publishers share it from a marker to its file's name,
    repair takes it alone to decide that a marker's file is missing (every process, every
    open of the directory counts; a killed holder's lock goes with it)."""
    fcntl.flock(dir_fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    try:
        yield
    finally:
        fcntl.flock(dir_fd, fcntl.LOCK_UN)
