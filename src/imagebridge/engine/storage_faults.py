"""Faults of the machine's storage: a full disk, an I/O error, a read-only filesystem.

Every place the bridge writes (the artifact root, the databases, the codex staging area)
turns such a fault into the same answer: a :class:`BridgeError` whose ``details.reason``
is one of :data:`DISK_FAULT_REASONS` and whose ``details.storage`` names the area, so a
caller and an operator can tell "the disk is full" from a bug. The process keeps serving
reads meanwhile, and :data:`STORAGE_HEALTH` remembers the last fault of each area until a
write there succeeds again (diagnostics and ``/health/ready`` report it as ``degraded``);
nothing refuses a write because of it, so writes work again as soon as space returns.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "DISK_FAULT_REASONS",
    "IO_ERROR",
    "NO_SPACE",
    "READ_ONLY",
    "STORAGE_HEALTH",
    "StorageArea",
    "StorageHealth",
    "disk_fault",
    "disk_fault_reason",
]

NO_SPACE: Final = "no_space"
IO_ERROR: Final = "io_error"
READ_ONLY: Final = "read_only"
DISK_FAULT_REASONS: Final = frozenset({NO_SPACE, IO_ERROR, READ_ONLY})

StorageArea = Literal["artifacts", "database", "staging"]

_REASON_BY_ERRNO: Final = {
    errno.ENOSPC: NO_SPACE,
    errno.EDQUOT: NO_SPACE,
    errno.EFBIG: NO_SPACE,
    errno.EIO: IO_ERROR,
    errno.EROFS: READ_ONLY,
}


def disk_fault_reason(exc: BaseException | None) -> str | None:
    """``no_space``, ``io_error`` or ``read_only`` when ``exc`` (or its cause) is such an
    ``OSError``; ``None`` for anything else (a missing file, a permission, a bug)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in _REASON_BY_ERRNO:
            return _REASON_BY_ERRNO[exc.errno]
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


_MESSAGES: Final = {
    NO_SPACE: "there is no space left on the device",
    IO_ERROR: "the device reported an I/O error",
    READ_ONLY: "the filesystem is read-only",
}


def disk_fault(
    code: ErrorCode,
    message: str,
    reason: str,
    area: StorageArea,
    *,
    retryable: bool,
    **details: Any,
) -> BridgeError:
    """The error of a write that a storage fault stopped (and the fault, recorded)."""
    STORAGE_HEALTH.failed(area, reason)
    return BridgeError(
        code,
        f"{message}: {_MESSAGES.get(reason, reason)}",
        retryable=retryable,
        details={"reason": reason, "storage": area, **details},
        suggestions=(
            "Free space on (or repair) the volume of the named storage; writes work again "
            "without a restart, and `/v1/diagnostics/extended` shows `storage` until then.",
        ),
    )


@dataclass(frozen=True, slots=True)
class _Fault:
    reason: str
    since: float
    last: float
    count: int


class StorageHealth:
    """The last storage fault of each area, until a write there succeeds again."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._faults: dict[str, _Fault] = {}

    def failed(self, area: StorageArea, reason: str) -> None:
        now = self._clock()
        with self._lock:
            old = self._faults.get(area)
            since = old.since if old is not None and old.reason == reason else now
            count = old.count + 1 if old is not None else 1
            self._faults[area] = _Fault(reason, since, now, count)

    def succeeded(self, area: StorageArea) -> None:
        if area in self._faults:  # the common case takes no lock
            with self._lock:
                self._faults.pop(area, None)

    def faulty(self, area: StorageArea) -> bool:
        """Whether ``area`` is in fault now (no lock: a stale answer costs one check)."""
        return area in self._faults

    @property
    def degraded(self) -> bool:
        return bool(self._faults)

    def reasons(self) -> dict[str, str]:
        """``{area: reason}`` of every area in fault now."""
        with self._lock:
            return {area: fault.reason for area, fault in sorted(self._faults.items())}

    def snapshot(self) -> dict[str, Any]:
        """``status`` (``ok`` / ``degraded``) and each faulty area's reason and times."""
        with self._lock:
            faults = {
                area: {
                    "reason": fault.reason,
                    "since": int(fault.since),
                    "last_seen": int(fault.last),
                    "failures": fault.count,
                }
                for area, fault in sorted(self._faults.items())
            }
        return {"status": "degraded" if faults else "ok", "areas": faults}

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()


STORAGE_HEALTH: Final = StorageHealth()
"""The process's view of its storage (one disk, one process: one state)."""
