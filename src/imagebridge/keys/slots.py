"""A key's ``max_concurrent`` slots, counted in the database across every instance.

A slot is a lease row taken by one conditional statement on the key's row (the key store's
:meth:`~imagebridge.storage.interfaces.KeyStore.acquire_slot`). This instance renews the
leases it holds every third of ``slot_lease_secs``; a killed instance's leases stop being
renewed, expire, and are reclaimed by the next request that finds the key full. A waiting
request retries with a backoff (20 ms up to ``slot_poll_max_ms``) and at once when a slot is
given back on this instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.interfaces import KeyStore

__all__ = ["KeySlot", "SlotLeases"]

_FIRST_POLL_S = 0.02
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KeySlot:
    """One of a key's ``max_concurrent`` slots, held by this instance (a lease row)."""

    key_id: str
    slot_id: str


class SlotLeases:
    """The slots this instance holds, and the heartbeat that keeps their leases alive."""

    def __init__(
        self,
        store: KeyStore,
        *,
        holder: str,
        lease_secs: int,
        poll_max_ms: int,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._holder = holder
        self._lease_secs = lease_secs
        self._poll_max_s = max(_FIRST_POLL_S, poll_max_ms / 1000)
        self._clock = clock
        self._held: dict[str, str] = {}
        self._heartbeat: asyncio.Task[None] | None = None
        self._released: asyncio.Event | None = None

    async def acquire(self, key_id: str, wait_s: float) -> KeySlot:
        """One of the key's slots, waiting up to ``wait_s`` for one. Past the wait: 429
        ``rate_limited`` (``details.reason = "key_concurrency"``), nothing held."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, wait_s)
        delay = _FIRST_POLL_S
        slot = KeySlot(key_id, "slot_" + secrets.token_hex(8))
        while True:
            released = self._release_event()
            if await self._try(slot):
                self._held[slot.slot_id] = slot.key_id
                self._keep_renewing()
                return slot
            left = deadline - loop.time()
            if left <= 0:
                raise BridgeError(
                    ErrorCode.RATE_LIMITED,
                    "API key is at its max_concurrent requests",
                    retryable=True,
                    details={"reason": "key_concurrency", "retry_after_ms": 1000},
                )
            with contextlib.suppress(TimeoutError):  # a local release wakes us at once
                await asyncio.wait_for(released.wait(), min(delay, left))
            delay = min(delay * 2, self._poll_max_s)

    async def release(self, slot: KeySlot) -> None:
        """Give the slot back (a store failure leaves its lease to expire, then reclaimed)."""
        self._held.pop(slot.slot_id, None)
        try:
            await asyncio.shield(self._store.release_slot(slot.key_id, slot.slot_id))
        except BridgeError as error:
            logger.warning(
                "could not give back an API key's concurrency slot; its lease will expire",
                extra={"code": error.code.value},
            )
        finally:
            event, self._released = self._released, None
            if event is not None:
                event.set()

    async def aclose(self) -> None:
        """Stop renewing (the leases still held expire, and are reclaimed)."""
        task, self._heartbeat = self._heartbeat, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _release_event(self) -> asyncio.Event:
        if self._released is None:
            self._released = asyncio.Event()
        return self._released

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def _try(self, slot: KeySlot) -> bool:
        """One conditional take; when the key is full, its expired leases are reclaimed
        first and the take is tried once more."""
        now = self._now_ms()
        expires = now + self._lease_secs * 1000

        async def take() -> bool:
            return await self._store.acquire_slot(
                slot.key_id, slot.slot_id, holder=self._holder, now_ms=now, expires_ms=expires
            )

        if await take():
            return True
        if await self._store.reclaim_slots(slot.key_id, now_ms=now) == 0:
            return False
        return await take()

    def _keep_renewing(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.create_task(self._renew_while_held())

    async def _renew_while_held(self) -> None:
        """The leases' heartbeat: runs while this instance holds slots."""
        interval = max(0.05, self._lease_secs / 3)
        while self._held:
            await asyncio.sleep(interval)
            if not self._held:
                return
            expires = self._now_ms() + self._lease_secs * 1000
            try:
                await self._store.renew_slots(list(self._held), expires_ms=expires)
            except BridgeError as error:
                logger.warning(
                    "could not renew API key concurrency slots",
                    extra={"code": error.code.value},
                )
