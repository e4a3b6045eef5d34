"""Named API keys as a service: authentication, quota reservations, usage, administration.

The HTTP surface and the job runner share one :class:`KeyService`. Nothing about a key is
cached: every request looks its key up (one indexed read) and every reservation is one
conditional statement in the database, so a revocation, an expiry or a spent quota takes
effect at once on every instance.

The life of a request on a key: :meth:`KeyService.acquire_slot` (wait, within the
request's deadline, while the key is at ``max_concurrent`` — counted in the database, so on
every instance together), :meth:`reserve` (``n``
images on every window, or 429 ``rate_limited`` with ``Retry-After`` at the window's reset,
before anything is sent upstream), the provider call, then :meth:`settle`: images not
delivered are given back, unless the outcome is unknown (the upstream call may have run and
been billed: the reservation is kept), and the outcome is added to the key's usage, and
:meth:`release_slot`.

A slot is a lease in the database: this service renews the leases it holds every third
of ``slot_lease_secs``; a killed instance's leases expire and are reclaimed by the next
request that finds the key full. A waiting request retries with a backoff (20 ms up to
``slot_poll_max_ms``) and at once when a slot is given back on this instance.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hmac
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.storage.interfaces import KeyStore
from imagebridge.storage.records import KeyAuditEntry, KeyRecord, KeyUsage
from imagebridge.storage.rules.keys import (
    WINDOWS,
    Windows,
    check_key_limits,
    display_prefix,
    hash_secret,
    mint_secret,
    windows_at,
    zone,
)

__all__ = [
    "KEY_SCOPE_PREFIX",
    "KeyService",
    "KeyServiceSettings",
    "KeySlot",
    "Reservation",
    "account_shares",
    "key_id_of_scope",
    "key_scope",
    "remaining_images",
    "scope_request_session",
    "scope_session_key",
    "unscope_response_session",
]

KEY_SCOPE_PREFIX = "key:"
"""Ownership scope of a key's jobs, artifacts and presets: ``key:<key id>``."""
_DUMMY_HASH = "0" * 64
_FIRST_POLL_S = 0.02
logger = logging.getLogger(__name__)


def key_scope(key_id: str) -> str:
    return KEY_SCOPE_PREFIX + key_id


def key_id_of_scope(scope: str) -> str | None:
    return scope[len(KEY_SCOPE_PREFIX) :] if scope.startswith(KEY_SCOPE_PREFIX) else None


@dataclass(frozen=True, slots=True)
class KeyServiceSettings:
    """``[server.keys]`` as plain values."""

    time_zone: str = "UTC"
    max_keys: int = 1_000
    slot_lease_secs: int = 30
    slot_poll_max_ms: int = 500


@dataclass(frozen=True, slots=True)
class KeySlot:
    """One of a key's ``max_concurrent`` slots, held by this instance (a lease row)."""

    key_id: str
    slot_id: str


@dataclass(frozen=True, slots=True)
class Reservation:
    """Images held on a key's windows for one request, in the periods they were taken in."""

    key: KeyRecord
    n: int
    windows: Windows


def remaining_images(record: KeyRecord, windows: Windows) -> dict[str, tuple[int, int, int]]:
    """``window → (limit, remaining, reset Unix time)`` for each window with a limit."""
    out: dict[str, tuple[int, int, int]] = {}
    for window in WINDOWS:
        limit = record.limits.window_limit(window)
        if limit is None:
            continue
        used = record.used_in(window, windows.start(window))
        out[window] = (limit, max(0, limit - used), windows.end(window))
    return out


@dataclass
class KeyService:
    """Keys, quotas and usage over one :class:`KeyStore` (see the module docstring)."""

    store: KeyStore
    settings: KeyServiceSettings = field(default_factory=KeyServiceSettings)
    clock: Callable[[], float] = time.time
    observer: Callable[[KeyRecord, KeyUsage], None] | None = None
    """Told every settled outcome (the server's per-key Prometheus counters)."""
    holder: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    )
    """This instance's name on its slot leases (diagnostics only)."""
    _held: dict[str, str] = field(default_factory=dict)
    _heartbeat: asyncio.Task[None] | None = None
    _released: asyncio.Event | None = None

    def __post_init__(self) -> None:
        self._zone = zone(self.settings.time_zone)

    def windows(self) -> Windows:
        return windows_at(int(self.clock()), self._zone)

    # -- authentication ------------------------------------------------------------------

    async def authenticate(self, secret: str) -> KeyRecord | None:
        """The live key whose secret this is, or ``None``; the same work for unknown keys
        (one hash, one indexed lookup, one constant-time comparison)."""
        digest = hash_secret(secret)
        found = await self.store.find(digest)
        stored = found[1] if found is not None else _DUMMY_HASH
        matches = hmac.compare_digest(stored.encode(), digest.encode())
        if found is None or not matches:
            return None
        record = found[0]
        return record if record.active(int(self.clock())) else None

    # -- quotas ------------------------------------------------------------------------

    async def acquire_slot(self, record: KeyRecord, wait_s: float) -> KeySlot | None:
        """One of the key's ``max_concurrent`` slots, waiting up to ``wait_s`` for one
        (``None``: the key has no such limit). Past the wait: 429 ``rate_limited``
        (``details.reason = "key_concurrency"``), nothing held."""
        if record.limits.max_concurrent is None:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, wait_s)
        delay = _FIRST_POLL_S
        poll_max = max(_FIRST_POLL_S, self.settings.slot_poll_max_ms / 1000)
        slot = KeySlot(record.id, "slot_" + secrets.token_hex(8))
        while True:
            released = self._release_event()
            if await self._try_slot(slot):
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
            delay = min(delay * 2, poll_max)

    async def release_slot(self, slot: KeySlot) -> None:
        """Give the slot back (a store failure leaves its lease to expire, then reclaimed)."""
        self._held.pop(slot.slot_id, None)
        try:
            await asyncio.shield(self.store.release_slot(slot.key_id, slot.slot_id))
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
        """Stop renewing leases (the ones still held expire) and close the store."""
        task, self._heartbeat = self._heartbeat, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.store.close()

    def _release_event(self) -> asyncio.Event:
        if self._released is None:
            self._released = asyncio.Event()
        return self._released

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def _try_slot(self, slot: KeySlot) -> bool:
        """One conditional take; when the key is full, its expired leases are reclaimed
        first and the take is tried once more."""
        now = self._now_ms()
        expires = now + self.settings.slot_lease_secs * 1000

        async def take() -> bool:
            return await self.store.acquire_slot(
                slot.key_id, slot.slot_id, holder=self.holder, now_ms=now, expires_ms=expires
            )

        if await take():
            return True
        if await self.store.reclaim_slots(slot.key_id, now_ms=now) == 0:
            return False
        return await take()

    def _keep_renewing(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.create_task(self._renew_while_held())

    async def _renew_while_held(self) -> None:
        """The leases' heartbeat: runs while this instance holds slots."""
        interval = max(0.05, self.settings.slot_lease_secs / 3)
        while self._held:
            await asyncio.sleep(interval)
            if not self._held:
                return
            expires = self._now_ms() + self.settings.slot_lease_secs * 1000
            try:
                await self.store.renew_slots(list(self._held), expires_ms=expires)
            except BridgeError as error:
                logger.warning(
                    "could not renew API key concurrency slots",
                    extra={"code": error.code.value},
                )

    def check_provider(self, record: KeyRecord, provider: str) -> None:
        allowed = record.limits.providers
        if allowed is not None and provider not in allowed:
            raise BridgeError(
                ErrorCode.PERMISSION_DENIED,
                "this API key may not use the requested provider",
                details={"provider": provider},
            )

    async def reserve(self, record: KeyRecord, n: int) -> Reservation:
        """Hold ``n`` images on every window, or raise (nothing was held).

        429 ``rate_limited`` with ``retry_after_ms`` up to the reset of the window(s)
        without room; 401 for a key revoked or expired since it was looked up.
        """
        windows = self.windows()
        taken = await self.store.reserve(record.id, n, windows)
        if taken is not None:
            return Reservation(taken, n, windows)
        current = await self.store.get(record.id)  # only to explain the refusal
        if not current.active(windows.now):
            raise BridgeError(ErrorCode.AUTHENTICATION, "API key is revoked or expired")
        raise _quota_refusal(current, n, windows)

    async def settle(
        self,
        reservation: Reservation,
        *,
        delivered: int,
        unknown: bool,
        provider: str,
        account: str | None = None,
        served_by: Mapping[str, int] | None = None,
        total_tokens: int = 0,
    ) -> KeyRecord:
        """Give back what was not delivered (not when the outcome is unknown), count usage.

        ``account``: the one pool account the whole outcome ran on (a failure names it);
        ``served_by``: ``{account: images}`` of a success (``engine.served``), split into
        one usage row per account."""
        n = reservation.n
        delivered = max(0, min(delivered, n))
        missing = n - delivered
        record = reservation.key
        if missing and not unknown:
            released = await self.store.release(record.id, missing, reservation.windows)
            record = released or record
        shares = account_shares(n, delivered, account, served_by)
        for index, (name, requested, got) in enumerate(shares):
            lost = requested - got
            usage = KeyUsage(
                key_id=record.id,
                day=reservation.windows.date,
                provider=provider,
                account=name,
                requested=requested,
                delivered=got,
                failed=0 if unknown else lost,
                unknown=lost if unknown else 0,
                total_tokens=max(0, total_tokens) if index == 0 else 0,
            )
            await self.store.record_usage(usage)
            if self.observer is not None:
                self.observer(record, usage)
        return record

    # -- administration ----------------------------------------------------------------

    async def create(
        self, name: str, values: Mapping[str, Any], *, actor: str
    ) -> tuple[KeyRecord, str]:
        """A new key and its secret (shown once, never stored)."""
        limits = check_key_limits(values)
        if len(await self.store.list()) >= self.settings.max_keys:
            raise BridgeError.invalid_request(
                "the key store is full (server.keys.max_keys)", field="name"
            )
        secret = mint_secret()
        record = await self.store.create(
            name,
            limits,
            secret_hash=hash_secret(secret),
            prefix=display_prefix(secret),
            actor=actor,
            now=int(self.clock()),
        )
        return record, secret

    async def rotate(self, key_id: str, *, actor: str) -> tuple[KeyRecord, str]:
        secret = mint_secret()
        record = await self.store.rotate(
            key_id,
            secret_hash=hash_secret(secret),
            prefix=display_prefix(secret),
            actor=actor,
            now=int(self.clock()),
        )
        return record, secret

    async def update(self, key_id: str, values: Mapping[str, Any], *, actor: str) -> KeyRecord:
        return await self.store.update(key_id, values, actor=actor, now=int(self.clock()))

    async def revoke(self, key_id: str, *, actor: str) -> KeyRecord:
        return await self.store.revoke(key_id, actor=actor, now=int(self.clock()))

    async def get(self, key_id: str) -> KeyRecord:
        return await self.store.get(key_id)

    async def list(self) -> list[KeyRecord]:
        return await self.store.list()

    async def audit(self, key_id: str | None = None) -> builtins.list[KeyAuditEntry]:
        return await self.store.audit(key_id=key_id)

    def describe(self, record: KeyRecord) -> dict[str, Any]:
        """A key as the admin API and the CLI show it (prefix only, never the secret)."""
        windows = self.windows()
        remaining = remaining_images(record, windows)
        return {
            "id": record.id,
            "name": record.name,
            "prefix": record.prefix,
            "state": record.state(windows.now),
            "created_at": record.created_at,
            "updated_at": record.updated_at,
            "revoked_at": record.revoked_at,
            **record.limits.to_dict(),
            "remaining": {
                w: {"limit": lim, "remaining": left, "reset_at": reset}
                for w, (lim, left, reset) in remaining.items()
            },
        }


def _quota_refusal(record: KeyRecord, n: int, windows: Windows) -> BridgeError:
    """429 for the windows without room; ``Retry-After`` at the latest of their resets."""
    full = []
    for window in WINDOWS:
        limit = record.limits.window_limit(window)
        if limit is not None and record.used_in(window, windows.start(window)) + n > limit:
            full.append(window)
    if not full:  # the counters moved since: a concurrent request took the room
        full = [w for w in WINDOWS if record.limits.window_limit(w) is not None][:1] or ["day"]
    reset = max(windows.end(w) for w in full)
    return BridgeError(
        ErrorCode.RATE_LIMITED,
        f"API key image quota exceeded ({', '.join(full)})",
        retryable=True,
        details={
            "reason": "key_quota",
            "windows": full,
            "reset_at": reset,
            "retry_after_ms": max(1, reset - windows.now) * 1000,
        },
    )


def _scoped_key(key_id: str, session_key: str) -> str:
    return f"{key_id}/{session_key}"


def scope_session_key(key_id: str, session_key: str) -> str:
    """The stored name of a key's session ``session_key``: ``<key id>/<session key>``.

    A key's sessions live in its own namespace, so another key using the same session
    name neither continues nor reads nor deletes its thread.
    """
    return _scoped_key(key_id, session_key)


def account_shares(
    n: int, delivered: int, account: str | None, served_by: Mapping[str, int] | None
) -> list[tuple[str, int, int]]:
    """``(account, requested, delivered)`` rows of one outcome of ``n`` images.

    Each account that served images is charged what it produced (in the order given) and
    delivered up to that; images no account is known for (a fan-out chunk that failed,
    or no pool) stay on the row of ``account`` (``""`` when unknown)."""
    rows: list[tuple[str, int, int]] = []
    left_n, left_delivered = n, delivered
    for name, count in (served_by or {}).items():
        requested = max(0, min(count, left_n))
        if requested == 0:
            continue
        got = min(requested, left_delivered)
        rows.append((name, requested, got))
        left_n -= requested
        left_delivered -= got
    if left_n > 0 or not rows:
        rows.append((account or "", left_n, left_delivered))
    return rows


def scope_request_session(request: ImageRequest, key_id: str) -> ImageRequest:
    """``request`` with its session key moved into the key's namespace."""
    session = request.session
    if session.key is None:
        return request
    scoped = session.model_copy(update={"key": _scoped_key(key_id, session.key)})
    return request.model_copy(update={"session": scoped})


def unscope_response_session(response: ImageResponse, key_id: str) -> ImageResponse:
    """The answer with the key's own session name back (as the caller sent it)."""
    session = response.session
    prefix = _scoped_key(key_id, "")
    if session is None or session.key is None or not session.key.startswith(prefix):
        return response
    plain = session.model_copy(update={"key": session.key[len(prefix) :]})
    return response.model_copy(update={"session": plain})
