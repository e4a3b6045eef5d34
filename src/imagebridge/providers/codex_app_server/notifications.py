"""Server notifications and the bounded channels that carry them to consumers.

A channel belongs to one consumer (usually one turn). It is bounded by
``notification_capacity``: the reader waits for room instead of dropping anything, but
never longer than ``slow_consumer_timeout`` — a consumer that falls further behind is
cut off with ``overloaded`` so one stuck turn cannot stall the whole link.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["Notification", "NotificationChannel"]


@dataclass(frozen=True, slots=True)
class Notification:
    """One server notification: its method, params object and line size in bytes."""

    method: str
    params: Mapping[str, Any]
    size: int = 0

    @property
    def thread_id(self) -> str | None:
        value = self.params.get("threadId")
        if isinstance(value, str):
            return value
        thread = self.params.get("thread")
        if isinstance(thread, Mapping) and isinstance(thread.get("id"), str):
            return str(thread["id"])
        return None

    @property
    def turn_id(self) -> str | None:
        value = self.params.get("turnId")
        if isinstance(value, str):
            return value
        turn = self.params.get("turn")
        if isinstance(turn, Mapping) and isinstance(turn.get("id"), str):
            return str(turn["id"])
        return None


class NotificationChannel:
    """A bounded, ordered queue of notifications for one consumer (usually one turn).

    The reader waits for room when the queue is full — back-pressure instead of loss —
    but at most ``slow_consumer_timeout``; a consumer that falls further behind is cut
    off with ``overloaded``. Items already queued are still delivered after the link
    closes; then :meth:`receive` raises the closing error.
    """

    def __init__(
        self,
        capacity: int,
        accept: Callable[[Notification], bool],
        *,
        slow_consumer_timeout: float,
    ) -> None:
        self._capacity = capacity
        self._accept = accept
        self._slow_consumer_timeout = slow_consumer_timeout
        self._items: deque[Notification] = deque()
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._closed = False
        self._error: BridgeError | None = None
        self.delivered = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def error(self) -> BridgeError | None:
        return self._error

    def accepts(self, notification: Notification) -> bool:
        return not self._closed and self._accept(notification)

    def __len__(self) -> int:
        return len(self._items)

    async def deliver(self, notification: Notification) -> bool:
        """Queue one notification; False if the channel is (or had to be) closed."""
        while not self._closed and len(self._items) >= self._capacity:
            self._writable.clear()
            try:
                async with asyncio.timeout(self._slow_consumer_timeout):
                    await self._writable.wait()
            except TimeoutError:
                self.fail(
                    BridgeError(
                        ErrorCode.OVERLOADED,
                        "codex app-server notifications arrived faster than they were consumed",
                        retryable=True,
                        details={"notification_capacity": self._capacity},
                    )
                )
        if self._closed:
            return False
        self._items.append(notification)
        self.delivered += 1
        self._readable.set()
        return True

    async def receive(self) -> Notification:
        """The next notification; raises the closing error once the queue is drained."""
        while True:
            if self._items:
                item = self._items.popleft()
                self._writable.set()
                if not self._items and not self._closed:
                    self._readable.clear()
                return item
            if self._closed:
                if self._error is not None:
                    raise self._error.copy()
                raise BridgeError(ErrorCode.CANCELLED, "the notification channel was closed")
            self._readable.clear()
            await self._readable.wait()

    def fail(self, error: BridgeError) -> None:
        """Close with an error that :meth:`receive` raises after the queued items."""
        if not self._closed:
            self._error = error
            self._close()

    def close(self) -> None:
        """Stop receiving (the consumer is done); queued items are dropped."""
        self._items.clear()
        self._close()

    def _close(self) -> None:
        self._closed = True
        self._readable.set()
        self._writable.set()
