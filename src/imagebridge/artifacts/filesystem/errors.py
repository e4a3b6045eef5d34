"""What a failed filesystem write means to a caller: a storage fault, or a plain refusal.

A full disk, an I/O error or a read-only filesystem is a storage fault: the error says so
in ``details.reason`` (``no_space``, ``io_error``, ``read_only``) and ``details.storage``
(``artifacts``), the storage health records it, and the engine delivers a billed image
inline instead of losing it. The S3 twin's ``errors.py`` does the same for a bucket that
does not answer or refuses.
"""

from __future__ import annotations

from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import disk_fault, disk_fault_reason

__all__ = ["write_error"]


def write_error(message: str, exc: BaseException, **details: Any) -> BridgeError:
    """A failed write: a storage fault says so in ``details.reason``; anything else keeps
    the plain ``artifact`` error."""
    reason = disk_fault_reason(exc)
    if reason is not None:
        return disk_fault(ErrorCode.ARTIFACT, message, reason, "artifacts", retryable=False)
    return BridgeError.artifact(message, **details)
