"""Graceful shutdown of the served process: drain on the first signal, stop at the second.

The first SIGTERM (or SIGINT) starts a drain. New requests answer 503 ``overloaded`` with
``Retry-After`` and ``/health/ready`` says not ready (a load balancer moves traffic away),
while requests and streams already in flight, and running durable jobs, get
``server.shutdown_grace_ms`` to finish; the job manager claims nothing more (queued jobs
stay queued: for the next start, or for the other instances on PostgreSQL). Once nothing
is in flight, or the grace ran out, the server is told to stop: the listener closes,
requests still running are cancelled, and the lifespan records the jobs still running
``interrupted`` with the recovery hint and closes the stores; the process exits 0.

Two bounds keep the stop bounded whatever hangs: a watchdog ends the process with exit
code 1 when all that has not finished ``server.shutdown_settle_ms`` after the grace, and a
second signal ends it at once with 128 + the signal's number. Neither leaves a half-written
file behind: artifacts are published by linking a complete, synced temporary file (a
leftover temporary file is swept at the next start), and rows left ``running`` are recorded
``interrupted`` at the next start or when their lease runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import NoReturn

from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "SHUTDOWN_RETRY_AFTER_MS",
    "Drain",
    "ShutdownController",
    "settle_seconds",
    "shutdown_grace_seconds",
]

logger = logging.getLogger("imagebridge.server")

SHUTDOWN_RETRY_AFTER_MS = 1_000
"""The ``Retry-After`` of a request refused while draining: another instance (or this one,
restarted) takes it. A hint to the client, not a wait of ours."""
_DRAIN_EXEMPT = frozenset({"/health/live", "/health/ready"})


def shutdown_grace_seconds(config: BridgeConfig) -> float:
    """``server.shutdown_grace_ms``, or ``runtime.shutdown_grace_ms`` when it is unset."""
    grace = config.server.shutdown_grace_ms
    return (config.runtime.shutdown_grace_ms if grace is None else grace) / 1000


def settle_seconds(config: BridgeConfig) -> float:
    return config.server.shutdown_settle_ms / 1000


class Drain:
    """Requests in flight, and whether new ones are refused because the server stops."""

    def __init__(self) -> None:
        self.draining = False
        self.deadline: float | None = None
        """``time.monotonic()`` at which the grace runs out, once draining."""
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.stop_requested = asyncio.Event()
        """Set (on the loop) once a stop signal arrived: startup waits end early."""

    def refuses(self, path: str) -> bool:
        """Whether a new request for ``path`` is refused (health checks still answer)."""
        return self.draining and path not in _DRAIN_EXEMPT

    def enter(self) -> None:
        self.in_flight += 1
        self._idle.clear()

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight <= 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def remaining(self, default: float) -> float:
        """Seconds left of the grace (``default`` when no drain started)."""
        if self.deadline is None:
            return default
        return max(0.0, self.deadline - time.monotonic())

    @staticmethod
    def refusal() -> BridgeError:
        return BridgeError(
            ErrorCode.OVERLOADED,
            "the bridge is shutting down; retry shortly",
            retryable=True,
            details={"reason": "shutting_down", "retry_after_ms": SHUTDOWN_RETRY_AFTER_MS},
        )


def _hard_exit(code: int) -> NoReturn:
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code)


class ShutdownController:
    """Turns signals into a drain, a stop, and (if need be) an immediate exit.

    ``stop_accepting_jobs`` stops the job manager from claiming; ``jobs_idle`` returns when
    no job runs here; ``request_stop`` tells the server to close its listener and return.
    """

    def __init__(
        self,
        drain: Drain,
        *,
        grace_s: float,
        settle_s: float,
        request_stop: Callable[[float], None],
        stop_accepting_jobs: Callable[[], Awaitable[None]],
        jobs_idle: Callable[[], Awaitable[None]],
        hard_exit: Callable[[int], NoReturn] = _hard_exit,
    ) -> None:
        self._drain = drain
        self._grace_s = grace_s
        self._settle_s = settle_s
        self._request_stop = request_stop
        self._stop_accepting_jobs = stop_accepting_jobs
        self._jobs_idle = jobs_idle
        self._hard_exit = hard_exit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._signals = 0

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the server runs on (signals arrive outside of it)."""
        self._loop = loop

    def on_signal(self, sig: int) -> None:
        """From the signal handler: the first signal drains, the second exits at once."""
        self._signals += 1
        if self._signals > 1:
            sys.stderr.write("second stop signal: exiting at once\n")
            self._hard_exit(128 + sig)
        self._drain.draining = True
        self._drain.deadline = time.monotonic() + self._grace_s
        self._start_watchdog(self._grace_s + self._settle_s)
        if self._loop is None:  # not even starting yet: nothing in flight to wait for
            self._request_stop(0.0)
            return
        self._loop.call_soon_threadsafe(self._begin)

    def _begin(self) -> None:
        self._drain.stop_requested.set()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="imagebridge-shutdown"
        )

    async def _run(self) -> None:
        logger.info("draining before shutdown", extra={"grace_ms": int(self._grace_s * 1000)})
        try:
            await self._stop_accepting_jobs()
        except Exception:
            logger.exception("the job manager did not stop claiming cleanly")

        async def settled() -> None:
            await self._drain.wait_idle()
            await self._jobs_idle()

        try:
            async with asyncio.timeout(self._drain.remaining(0.0)):
                await settled()
        except TimeoutError:
            logger.warning(
                "shutdown grace ran out with work in flight",
                extra={"requests": self._drain.in_flight},
            )
        self._request_stop(self._drain.remaining(0.0))

    def _start_watchdog(self, after_s: float) -> None:
        def watch() -> None:
            time.sleep(after_s)
            sys.stderr.write("shutdown did not finish within its grace and settle time\n")
            self._hard_exit(1)

        threading.Thread(target=watch, name="imagebridge-shutdown-watchdog", daemon=True).start()
