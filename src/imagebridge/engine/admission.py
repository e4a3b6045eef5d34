"""Admission gates: bounded concurrency plus a bounded FIFO waiting room.

A gate never queues more callers than it was told to; the excess is rejected at once with
a retryable ``overloaded`` error, so a burst turns into fast 503s instead of growing latency.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine import tracing
from imagebridge.engine.cancellation import CancelToken, Deadline

__all__ = ["REJECTION_RETRY_AFTER_MS", "AdmissionGate", "GateLimits", "GatePermit"]


@dataclass(slots=True)
class GatePermit:
    """A held slot; release exactly once (``async with`` or :meth:`release`)."""

    gate: AdmissionGate
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.gate._release()

    async def __aenter__(self) -> GatePermit:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.release()


REJECTION_RETRY_AFTER_MS = 1000
"""How long a rejected caller is told to wait: the original's effective ``Retry-After: 1``."""


@dataclass(frozen=True, slots=True)
class GateLimits:
    """One gate's bounds, as configured. ``None`` means unlimited."""

    max_concurrent: int | None = None
    max_queued: int | None = None
    retry_after_ms: int = REJECTION_RETRY_AFTER_MS


class AdmissionGate:
    """``max_concurrent``/``max_queued`` of ``None`` mean unlimited; a queue of 0 means none.

    A rejection carries ``details.retry_after_ms`` so clients (and the HTTP layer's
    ``Retry-After``) know when capacity is worth asking for again.
    """

    def __init__(
        self,
        label: str,
        max_concurrent: int | None,
        max_queued: int | None,
        *,
        retry_after_ms: int = REJECTION_RETRY_AFTER_MS,
    ) -> None:
        if retry_after_ms < 0:
            raise BridgeError(
                ErrorCode.CONFIGURATION, "admission retry_after_ms must not be negative"
            )
        if max_concurrent is not None and max_concurrent < 1:
            raise BridgeError(ErrorCode.CONFIGURATION, "admission concurrency must be positive")
        if max_queued is not None and max_queued < 0:
            raise BridgeError(ErrorCode.CONFIGURATION, "admission queue must not be negative")
        self.label = label
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.retry_after_ms = retry_after_ms
        self._active = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    @classmethod
    def limited(cls, label: str, limits: GateLimits) -> AdmissionGate:
        """A gate bounded as ``limits`` configures it."""
        return cls(
            label, limits.max_concurrent, limits.max_queued, retry_after_ms=limits.retry_after_ms
        )

    @property
    def queued(self) -> int:
        return sum(1 for waiter in self._waiters if not waiter.done())

    @property
    def active(self) -> int:
        return self._active

    def _has_room(self) -> bool:
        return self.max_concurrent is None or self._active < self.max_concurrent

    async def acquire(self, deadline: Deadline, cancellation: CancelToken) -> GatePermit:
        """A slot, at once or after waiting in line until the deadline or cancellation.

        Only a caller that has to get in line gets an ``admission`` span (the wait, or the
        refusal of a full line): one admitted at once has nothing to show, and pays nothing.
        """
        if self._closed:
            raise BridgeError(ErrorCode.CANCELLED, "runtime is shutting down")
        if self._has_room() and not self._waiters:
            self._active += 1
            return GatePermit(self)
        with tracing.span(tracing.ADMISSION, {tracing.GATE: self.label}):
            return await self._wait(deadline, cancellation)

    async def _wait(self, deadline: Deadline, cancellation: CancelToken) -> GatePermit:
        if self.max_queued is not None and self.queued >= self.max_queued:
            raise BridgeError(
                ErrorCode.OVERLOADED,
                "runtime queue capacity is exhausted",
                retryable=True,
                details={"limit": self.label, "retry_after_ms": self.retry_after_ms},
            )
        if deadline.expired:
            raise self._timeout()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()

        def fail(error: BridgeError) -> None:
            if not waiter.done():
                waiter.set_exception(error)

        timer = loop.call_at(deadline.at, fail, self._timeout())
        unregister = cancellation.on_cancel(
            lambda: fail(
                BridgeError(ErrorCode.CANCELLED, "request was cancelled while waiting for capacity")
            )
        )
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release()  # granted, but the caller is leaving anyway
            raise
        finally:
            timer.cancel()
            unregister()
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        return GatePermit(self)

    def _timeout(self) -> BridgeError:
        return BridgeError(
            ErrorCode.TIMEOUT,
            "request deadline elapsed while waiting for capacity",
            retryable=True,
            details={"limit": self.label},
        )

    def _release(self) -> None:
        self._active -= 1
        while self._waiters and self._has_room():
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._active += 1
                waiter.set_result(None)

    def close(self) -> None:
        """Refuse new callers and fail every waiter (shutdown)."""
        self._closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(BridgeError(ErrorCode.CANCELLED, "runtime is shutting down"))
