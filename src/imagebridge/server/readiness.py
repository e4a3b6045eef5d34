"""Cached readiness: probed in the background, never by the request that asks.

A readiness endpoint that probes providers on every call would let a load balancer (or an
attacker) drive upstream traffic. Instead one background task probes every
``interval`` seconds with a per-probe ``timeout``; ``/health/ready`` reads the cached
answer, which counts as stale (not ready) once it is older than ``stale_after``. Other
components the bridge needs (the job store) are checked by the same probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from imagebridge.engine.registry import ProviderReadiness

__all__ = ["ReadinessMonitor", "ReadinessProbe"]

logger = logging.getLogger("imagebridge.server")

ReadinessProbe = Callable[[float], Awaitable[Sequence[ProviderReadiness]]]
"""Runs every provider's readiness check, each bounded by the given timeout (seconds)."""

DependencyCheck = Callable[[], Awaitable[bool]]
"""Another component readiness depends on (the job store): True when healthy."""


class ReadinessMonitor:
    def __init__(
        self,
        probe: ReadinessProbe,
        *,
        interval: float = 30.0,
        timeout: float = 10.0,
        stale_after: float = 90.0,
        clock: Callable[[], float] = time.monotonic,
        dependencies: Sequence[DependencyCheck] = (),
    ) -> None:
        if interval <= 0 or timeout <= 0 or stale_after <= 0:
            raise ValueError("readiness intervals must be positive")
        self._probe = probe
        self.dependencies: list[DependencyCheck] = list(dependencies)
        self._dependencies_ok = True
        self.interval = interval
        self.timeout = timeout
        self.stale_after = stale_after
        self._clock = clock
        self._results: list[ProviderReadiness] | None = None
        self._probed_at: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._first: asyncio.Event | None = None

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._first = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="imagebridge-readiness")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.interval)

    async def refresh(self) -> list[ProviderReadiness]:
        """Probe now and cache the answer (the background task's one step)."""
        try:
            results = list(await asyncio.wait_for(self._probe(self.timeout), self.timeout + 1))
        except TimeoutError:
            results = None
        except Exception:  # a broken probe must not kill the monitor
            logger.exception("readiness probe failed")
            results = None
        self._dependencies_ok = await self._check_dependencies()
        if results is None:
            self._results = None
            self._probed_at = None
        else:
            self._results = results
            self._probed_at = self._clock()
        if self._first is not None:
            self._first.set()
        return results or []

    async def _check_dependencies(self) -> bool:
        for check in self.dependencies:
            try:
                if not await asyncio.wait_for(check(), self.timeout):
                    return False
            except Exception:  # includes TimeoutError: an unanswered check is not healthy
                return False
        return True

    # -- answers ----------------------------------------------------------------------

    @property
    def probed(self) -> bool:
        """Whether a probe has completed and its answer is cached."""
        return self._results is not None

    @property
    def ready(self) -> bool:
        """True only with a fresh probe in which every provider was ready."""
        if self._results is None or self._probed_at is None:
            return False
        if self._clock() - self._probed_at > self.stale_after:
            return False
        return self._dependencies_ok and all(result.ready for result in self._results)

    async def latest(self) -> list[ProviderReadiness] | None:
        """The cached results; waits (bounded) for the first probe if it is still running."""
        if self._results is None and self._first is not None and not self._first.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first.wait(), self.timeout + 1)
        return None if self._results is None else list(self._results)
