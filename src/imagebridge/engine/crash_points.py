"""Test-only crash points: the process kills itself (SIGKILL) at a named write step.

Every multi-step write (an artifact's temp file, marker and link; its sidecar; a job's
outcome row) calls :func:`crash_point` between its steps. When the environment variable
:data:`CRASH_ENV` names that step, the process sends itself ``SIGKILL`` there: nothing
after it runs (no ``finally``, no ``atexit``, no buffered write), exactly what ``kill -9``
or a power cut leaves. The restart tests (tests/resilience/test_crash_steps.py) use it to
show that each step's recovery rule leaves no unowned file and no dangling row. Unset (the
only production state) it costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal
from typing import Final

__all__ = ["CRASH_ENV", "crash_point"]

CRASH_ENV: Final = "IMAGEBRIDGE_TEST_CRASH_AT"


def crash_point(step: str) -> None:
    """``SIGKILL`` this process now if :data:`CRASH_ENV` names ``step``."""
    if os.environ.get(CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
