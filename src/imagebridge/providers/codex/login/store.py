"""Where the bridge keeps its own logins, and how it writes them safely.

One login is a directory ``<accounts dir>/<name>/`` (mode 0700) holding ``auth.json``
(mode 0600) in the codex CLI's shape, so the directory can be a codex child's
``CODEX_HOME``, and ``auth.json.lock``, the ``fcntl`` lock every writer holds. Writes go
to a temporary file in the same directory, are fsynced and renamed over ``auth.json``:
a reader sees the old document or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from imagebridge.contract.accounts import ACCOUNT_NAME_RULE, is_account_name
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.crash_points import crash_point
from imagebridge.providers.codex.auth import AUTH_FILE_NAME

__all__ = [
    "LOCK_FILE_NAME",
    "OwnLogin",
    "auth_document",
    "list_logins",
    "locked",
    "remove_stale_temps",
    "utc_stamp",
    "write_auth_atomically",
]

LOCK_FILE_NAME: Final = AUTH_FILE_NAME + ".lock"
_LOCK_POLL_S: Final = 0.02


@dataclass(frozen=True, slots=True)
class OwnLogin:
    """A login the bridge owns: a name and the home directory it lives in."""

    name: str
    home: Path

    @classmethod
    def under(cls, accounts_dir: Path, name: str) -> OwnLogin:
        """The login ``name`` in ``accounts_dir`` (the name is checked: it is a path part)."""
        if not is_account_name(name):
            raise BridgeError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid account name: {ACCOUNT_NAME_RULE}.",
                details={"field": "account"},
            )
        return cls(name=name, home=accounts_dir / name)

    @property
    def auth_file(self) -> Path:
        return self.home / AUTH_FILE_NAME

    @property
    def lock_file(self) -> Path:
        return self.home / LOCK_FILE_NAME

    def exists(self) -> bool:
        return self.auth_file.is_file()


def list_logins(accounts_dir: Path) -> list[OwnLogin]:
    """Own logins in ``accounts_dir`` (directories with an ``auth.json``), by name."""
    try:
        entries = sorted(accounts_dir.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    logins = [OwnLogin(entry.name, entry) for entry in entries if is_account_name(entry.name)]
    return [login for login in logins if login.exists()]


def auth_document(
    *,
    id_token: str,
    access_token: str,
    refresh_token: str,
    account_id: str | None,
    now: float | None = None,
) -> dict[str, Any]:
    """An ``auth.json`` document as the codex CLI writes it after a ChatGPT sign-in."""
    return {
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": None,
        "tokens": {
            "id_token": id_token,
            "access_token": access_token,
            "refresh_token": refresh_token,
            "account_id": account_id,
        },
        "last_refresh": utc_stamp(time.time() if now is None else now),
    }


def utc_stamp(now: float) -> str:
    """``last_refresh`` as codex writes it: RFC 3339 in UTC with a ``Z``."""
    return datetime.fromtimestamp(now, tz=UTC).isoformat().replace("+00:00", "Z")


def _ensure_home(home: Path) -> None:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(home, 0o700)  # mkdir's mode is masked by the umask; a reused directory too


_TEMP_PREFIX: Final = f".{AUTH_FILE_NAME}."


def remove_stale_temps(login: OwnLogin) -> int:
    """Remove temp files of ``auth.json`` whose writer is gone (killed between its write
    and its rename); they hold tokens. Writers hold the login's lock, so under it any
    temp file of a process that no longer runs is a leftover. Returns how many."""
    removed = 0
    try:
        names = os.listdir(login.home)
    except OSError:
        return 0
    for name in names:
        parts = name.removeprefix(_TEMP_PREFIX).split(".")
        if not name.startswith(_TEMP_PREFIX) or len(parts) != 3 or parts[2] != "tmp":
            continue
        if not parts[0].isdigit() or _alive(int(parts[0])):
            continue
        with contextlib.suppress(OSError):
            os.unlink(login.home / name)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, not ours to signal
    return True


def write_auth_atomically(login: OwnLogin, document: Mapping[str, Any]) -> None:
    """Replace ``auth.json`` with ``document``: temp file (0600), fsync, rename, fsync dir.

    Leftover temp files of killed writers are removed first (:func:`remove_stale_temps`).
    """
    _ensure_home(login.home)
    remove_stale_temps(login)
    data = json.dumps(document, indent=2).encode("utf-8")
    temp = login.home / f"{_TEMP_PREFIX}{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        crash_point("login.temp_written")
        os.replace(temp, login.auth_file)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    dir_fd = os.open(login.home, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def locked(login: OwnLogin, timeout_s: float) -> Iterator[None]:
    """Hold the login's cross-process lock (``flock`` on ``auth.json.lock``).

    Waits at most ``timeout_s`` for another process (a refresh takes one issuer call);
    after that the caller gets a retryable ``unavailable`` error instead of a hang.
    """
    _ensure_home(login.home)
    fd = os.open(login.lock_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BridgeError(
                        ErrorCode.OVERLOADED,
                        "Another process is refreshing this login; try again shortly.",
                        retryable=True,
                        details={"reason": "login_locked"},
                    ) from None
                time.sleep(_LOCK_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
