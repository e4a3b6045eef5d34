"""Cooperative cancellation tokens and monotonic deadlines.

A :class:`CancelToken` is how the engine tells a provider "stop when you can": it is a
signal, not task cancellation, so a provider may finish (or report) within the grace period.
Tokens form a tree: cancelling a parent cancels every child, never the other way round.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable

__all__ = ["CancelToken", "Deadline"]


class CancelToken:
    """A one-shot cancellation signal with children and callbacks."""

    def __init__(self, parent: CancelToken | None = None) -> None:
        self._cancelled = False
        self._reason = ""
        self._event: asyncio.Event | None = None
        self._children: weakref.WeakSet[CancelToken] = weakref.WeakSet()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next_handle = 0
        if parent is not None:
            parent._adopt(self)

    def _adopt(self, child: CancelToken) -> None:
        if self._cancelled:
            child.cancel(self._reason)
        else:
            self._children.add(child)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def reason(self) -> str:
        return self._reason

    def child(self) -> CancelToken:
        return CancelToken(self)

    def cancel(self, reason: str = "cancelled") -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._reason = reason
        if self._event is not None:
            self._event.set()
        callbacks = list(self._callbacks.values())
        self._callbacks.clear()
        for callback in callbacks:
            callback()
        for child in list(self._children):
            child.cancel(reason)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` once on cancellation (now, if already cancelled).

        Returns a function that unregisters the callback.
        """
        if self._cancelled:
            callback()
            return lambda: None
        handle = self._next_handle
        self._next_handle += 1
        self._callbacks[handle] = callback

        def unregister() -> None:
            self._callbacks.pop(handle, None)

        return unregister

    async def wait(self) -> None:
        if self._cancelled:
            return
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()


class Deadline:
    """An absolute point on the event loop's monotonic clock."""

    __slots__ = ("at",)

    def __init__(self, at: float) -> None:
        self.at = at

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(asyncio.get_running_loop().time() + seconds)

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - asyncio.get_running_loop().time())

    @property
    def expired(self) -> bool:
        return asyncio.get_running_loop().time() >= self.at
