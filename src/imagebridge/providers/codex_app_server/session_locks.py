"""One turn at a time per codex thread: keyed locks with a deadline- and cancel-aware wait.

Two requests that name the same session key (or the same explicit thread) must not run
turns on one thread at once, so each request holds a :class:`SessionLease` over its lock
keys for as long as its turn runs. A lease may outlive the request that took it — the
provider hands it to the background task that finishes an abandoned turn — so it is an
object with an idempotent :meth:`SessionLease.release`, not a context manager.

Keys are taken one at a time in the order given; callers always pass the session key
before the thread id, and a request that only knows a thread id takes just that one, so
two requests can never wait on each other in a cycle.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.cancellation import CancelToken, Deadline

__all__ = ["SessionLease", "SessionLocks"]


@dataclass(slots=True)
class _Entry:
    lock: asyncio.Lock
    users: int = 0


class SessionLease:
    """The locks one request holds; :meth:`release` frees them all (once)."""

    def __init__(self, owner: SessionLocks) -> None:
        self._owner = owner
        self._keys: list[str] = []
        self.released = False

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self._keys)

    async def extend(self, key: str, deadline: Deadline, cancellation: CancelToken) -> None:
        """Also take ``key`` (a no-op when already held)."""
        if self.released:
            raise BridgeError(ErrorCode.INTERNAL, "a released session lease cannot be extended")
        if key in self._keys:
            return
        await self._owner._acquire(key, deadline, cancellation)
        self._keys.append(key)

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        for key in reversed(self._keys):
            self._owner._release(key)
        self._keys.clear()


class SessionLocks:
    """Named locks created on demand and dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        """How many keys are currently held or waited for."""
        return len(self._entries)

    def held(self, key: str) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.lock.locked()

    async def acquire(
        self, keys: list[str], deadline: Deadline, cancellation: CancelToken
    ) -> SessionLease:
        """Take every key in order; on failure nothing stays held."""
        lease = SessionLease(self)
        try:
            for key in keys:
                await lease.extend(key, deadline, cancellation)
        except BaseException:
            lease.release()
            raise
        return lease

    async def _acquire(self, key: str, deadline: Deadline, cancellation: CancelToken) -> None:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(asyncio.Lock())
        entry.users += 1
        granted = False
        try:
            acquire = asyncio.ensure_future(entry.lock.acquire())
            cancelled = asyncio.ensure_future(cancellation.wait())
            try:
                await asyncio.wait(
                    {acquire, cancelled},
                    timeout=deadline.remaining(),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                cancelled.cancel()
                if acquire.done() and not acquire.cancelled():
                    granted = True
                else:
                    acquire.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await acquire
                    granted = acquire.done() and not acquire.cancelled()
            if granted and cancellation.cancelled:
                entry.lock.release()
                granted = False
            if not granted:
                if cancellation.cancelled:
                    raise _cancelled()
                raise BridgeError(
                    ErrorCode.TIMEOUT,
                    "request timed out while waiting for the session",
                    retryable=True,
                    details={"stage": "session_wait"},
                )
        finally:
            if not granted:
                self._forget(key, entry)

    def _release(self, key: str) -> None:
        entry = self._entries.get(key)
        if entry is None:
            return
        if entry.lock.locked():
            entry.lock.release()
        self._forget(key, entry)

    def _forget(self, key: str, entry: _Entry) -> None:
        entry.users -= 1
        if entry.users <= 0 and self._entries.get(key) is entry:
            del self._entries[key]


def _cancelled() -> BridgeError:
    return BridgeError(
        ErrorCode.CANCELLED,
        "request was cancelled while waiting for the session",
        details={"stage": "session_wait"},
    )
