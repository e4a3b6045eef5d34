"""The served process's C allocator: keep freed image-sized blocks for reuse.

A request through an OpenAI-compatible upstream allocates a few blocks the size of its
image (the answer's body, its base64 text, the decoded bytes) and frees them when it ends.
With glibc's default, *dynamic* thresholds the top of the heap is handed back to the
system as soon as more than twice the largest block freed so far is free there, so with
images of a few MB the heap can shrink after every request and the next one faults every
4 KiB page back in (bench/gateway.py, a 4 MB image per request: up to ~2 650 page faults
and ~6 ms of CPU per request, depending on the order of the process's allocations; see
docs/operations.md). ``server.malloc`` fixes the thresholds instead (``mallopt``).
Blocks at or above ``mmap_threshold_bytes`` (a 4096² image's pixels) still get mappings
of their own, returned as soon as they are freed, so the memory held per in-flight
request does not grow (bench/memory.py).
"""

from __future__ import annotations

import ctypes
import logging
import platform
import sys

__all__ = ["tune_malloc"]

logger = logging.getLogger("imagebridge.server")

# <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def tune_malloc(mmap_threshold_bytes: int, trim_threshold_bytes: int) -> bool:
    """Fix glibc's thresholds for this process; ``False`` (nothing changed) elsewhere."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # The mmap threshold first: setting either one ends glibc's dynamic adjustment.
    applied: bool = mallopt(_M_MMAP_THRESHOLD, mmap_threshold_bytes) == 1
    applied = mallopt(_M_TRIM_THRESHOLD, trim_threshold_bytes) == 1 and applied
    if not applied:
        logger.warning("the C allocator refused server.malloc's thresholds")
    return applied
