"""Waiting for a state, and how long at most: a hang guard, never a measure.

A server thread, a bridge subprocess, PostgreSQL or Ceph start in a second or two on an idle
machine and in tens of seconds on one whose cores are shared (scripts/check runs a worker per
core, beside whatever else the machine does). A wait for "it is up" returns the moment it
is, so a generous bound costs a passing run nothing; a tight one fails a healthy run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final

STARTUP_S: Final = 120.0
"""The most a server or child process may take to answer after it was started."""

STATE_S: Final = 60.0
"""The most a wait for some other state (a job running, a probe done) takes by default."""


def wait_until(
    predicate: Callable[[], bool], timeout: float = STATE_S, interval: float = 0.01
) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def wait_or_fail(
    predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05
) -> None:
    """:func:`wait_until`, failing the test with ``what`` when it does not come."""
    import pytest  # here, not at the top: server processes in a mount namespace import this

    if not wait_until(predicate, timeout, interval):
        pytest.fail(f"{what}: not reached within {timeout} s")


async def eventually(
    predicate: Callable[[], Awaitable[bool]], timeout: float = STATE_S, interval: float = 0.01
) -> None:
    """:func:`wait_or_fail` for an awaitable ``predicate``, polled on the running loop (the
    state it waits for is made by tasks on that same loop)."""
    import pytest

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        if loop.time() >= deadline:
            pytest.fail(f"condition not reached within {timeout} s")
        await asyncio.sleep(interval)
