"""Named API keys as a service: authentication, quotas, usage, administration.

The HTTP surface and the job runner share one :class:`KeyService`, over one
:class:`~imagebridge.storage.interfaces.KeyStore`. Nothing about a key is cached: every
request looks its key up (one indexed read) and every reservation is one conditional
statement in the database, so a revocation, an expiry or a spent quota takes effect at once
on every instance.

A request on a key is one :meth:`KeyService.charge` (``charge.py``): the providers checked,
a ``max_concurrent`` slot (:mod:`imagebridge.keys.slots`), :meth:`reserve`, the call, then
:meth:`settle` and the slot given back. The administration methods speak the admin API's
shapes (``contract/keys.py``); the surfaces never reach past them into the store.
"""

from __future__ import annotations

import hmac
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.keys import (
    BridgeKey,
    BridgeKeyAuditEntry,
    BridgeKeyCreate,
    BridgeKeyIssued,
    BridgeKeyList,
    BridgeKeyQuota,
    BridgeKeyUpdate,
    BridgeKeyUsageRow,
    KeyWindow,
)
from imagebridge.contract.request import ImageRequest
from imagebridge.keys.charge import QuotaCharge
from imagebridge.keys.quota import Reservation, account_shares, quota_readings, quota_refusal
from imagebridge.keys.slots import KeySlot, SlotLeases
from imagebridge.keys.wire import audit_entry, key_view, usage_row
from imagebridge.storage.interfaces import KeyStore
from imagebridge.storage.records import KeyRecord, KeyUsage
from imagebridge.storage.rules.keys import (
    Windows,
    check_key_limits,
    display_prefix,
    hash_secret,
    mint_secret,
    windows_at,
    zone,
)

__all__ = ["KeyService", "KeyServiceSettings"]

_DUMMY_HASH = "0" * 64


@dataclass(frozen=True, slots=True)
class KeyServiceSettings:
    """``[server.keys]`` as plain values."""

    time_zone: str = "UTC"
    max_keys: int = 1_000
    slot_lease_secs: int = 30
    slot_poll_max_ms: int = 500


@dataclass
class KeyService:
    """Keys, quotas and usage over one :class:`KeyStore` (see the module docstring)."""

    store: KeyStore
    settings: KeyServiceSettings = field(default_factory=KeyServiceSettings)
    clock: Callable[[], float] = time.time
    holder: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    )
    """This instance's name on its slot leases (diagnostics only)."""

    def __post_init__(self) -> None:
        self._zone = zone(self.settings.time_zone)
        self._slots = SlotLeases(
            self.store,
            holder=self.holder,
            lease_secs=self.settings.slot_lease_secs,
            poll_max_ms=self.settings.slot_poll_max_ms,
            clock=lambda: self.clock(),
        )

    @property
    def time_zone(self) -> str:
        """The IANA zone of the quota calendar and of usage days."""
        return self.settings.time_zone

    def windows(self) -> Windows:
        return windows_at(int(self.clock()), self._zone)

    async def aclose(self) -> None:
        """Stop renewing slot leases (the ones still held expire) and close the store."""
        await self._slots.aclose()
        await self.store.close()

    # -- authentication and lookup -------------------------------------------------------

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

    async def get(self, key_id: str) -> KeyRecord:
        """The key with this id (404 ``resource: key`` for none)."""
        return await self.store.get(key_id)

    async def find(self, key: str) -> KeyRecord:
        """The key with this id, else with this name (one 404 for neither)."""
        try:
            return await self.store.get(key)
        except BridgeError:
            return await self.store.find_by_name(key)

    # -- quotas ------------------------------------------------------------------------

    def quota(self, record: KeyRecord) -> dict[KeyWindow, BridgeKeyQuota]:
        """The key's readings now, for each window it has a limit on."""
        return quota_readings(record, self.windows())

    def charge(
        self,
        key: KeyRecord,
        request: ImageRequest,
        *,
        default_provider: str,
        slot_wait_s: float | None = None,
    ) -> QuotaCharge:
        """One request's charge on ``key`` (:class:`QuotaCharge`): ``async with`` it around
        the call. ``slot_wait_s``: take a ``max_concurrent`` slot, waiting up to that long
        (``None``: no slot, as for a job, which waits in the job queue instead)."""
        return QuotaCharge(
            self, key, request, default_provider=default_provider, slot_wait_s=slot_wait_s
        )

    def check_provider(self, record: KeyRecord, provider: str) -> None:
        allowed = record.limits.providers
        if allowed is not None and provider not in allowed:
            raise BridgeError(
                ErrorCode.PERMISSION_DENIED,
                "this API key may not use the requested provider",
                details={"provider": provider},
            )

    async def acquire_slot(self, record: KeyRecord, wait_s: float) -> KeySlot | None:
        """One of the key's ``max_concurrent`` slots, waiting up to ``wait_s`` for one
        (``None``: the key has no such limit). Past the wait: 429 ``rate_limited``
        (``details.reason = "key_concurrency"``), nothing held."""
        if record.limits.max_concurrent is None:
            return None
        return await self._slots.acquire(record.id, wait_s)

    async def release_slot(self, slot: KeySlot) -> None:
        """Give the slot back (a store failure leaves its lease to expire, then reclaimed)."""
        await self._slots.release(slot)

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
        raise quota_refusal(current, n, windows)

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
        kept: bool = False,
    ) -> KeyRecord:
        """Give back what was not delivered (not when the outcome is unknown), count usage.

        ``account``: the one pool account the whole outcome ran on (a failure names it);
        ``served_by``: ``{account: images}`` of a success (``engine.served``), split into
        one usage row per account. ``kept``: the caller had gone, so what was delivered
        went to the history (each row's ``kept`` says so; it counts once all the same)."""
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
                kept=got if kept else 0,
            )
            await self.store.record_usage(usage)
        return record

    async def record_replay(self, record: KeyRecord, *, provider: str, images: int) -> None:
        """Count ``images`` answered again to a retry that joined an earlier generation:
        nothing is reserved or charged (the generation was counted once, when it ran); the
        usage row's ``replayed`` says it happened."""
        if images <= 0:
            return
        usage = KeyUsage(
            key_id=record.id,
            day=self.windows().date,
            provider=provider,
            account="",
            requested=0,
            delivered=0,
            failed=0,
            unknown=0,
            replayed=images,
        )
        await self.store.record_usage(usage)

    # -- administration ----------------------------------------------------------------

    def view(self, record: KeyRecord) -> BridgeKey:
        """A key as the admin API and the CLI show it (the prefix only, never the secret)."""
        return key_view(record, self.windows())

    async def create(self, body: BridgeKeyCreate, *, actor: str) -> BridgeKeyIssued:
        """A new key and its secret (shown once, never stored)."""
        limits = check_key_limits(body.changes())
        if len(await self.store.list()) >= self.settings.max_keys:
            raise BridgeError.invalid_request(
                "the key store is full (server.keys.max_keys)", field="name"
            )
        secret = mint_secret()
        record = await self.store.create(
            body.name,
            limits,
            secret_hash=hash_secret(secret),
            prefix=display_prefix(secret),
            actor=actor,
            now=int(self.clock()),
        )
        return BridgeKeyIssued(key=self.view(record), secret=secret)

    async def rotate(self, key_id: str, *, actor: str) -> BridgeKeyIssued:
        """A new secret for the key (the old one stops at once; usage and quotas stay)."""
        secret = mint_secret()
        record = await self.store.rotate(
            key_id,
            secret_hash=hash_secret(secret),
            prefix=display_prefix(secret),
            actor=actor,
            now=int(self.clock()),
        )
        return BridgeKeyIssued(key=self.view(record), secret=secret)

    async def update(self, key_id: str, body: BridgeKeyUpdate, *, actor: str) -> BridgeKey:
        """Change the limits the body names (``None`` clears one)."""
        record = await self.store.update(key_id, body.changes(), actor=actor, now=int(self.clock()))
        return self.view(record)

    async def revoke(self, key_id: str, *, actor: str) -> BridgeKey:
        record = await self.store.revoke(key_id, actor=actor, now=int(self.clock()))
        return self.view(record)

    async def show(self, key_id: str) -> BridgeKey:
        return self.view(await self.store.get(key_id))

    async def records(self) -> list[KeyRecord]:
        """Every key's stored record (the operator's gauges read their windows)."""
        return await self.store.list()

    async def listing(self) -> BridgeKeyList:
        """Every key, in name order."""
        return BridgeKeyList(data=[self.view(record) for record in await self.store.list()])

    async def usage(
        self,
        *,
        key: str | None = None,
        provider: str | None = None,
        account: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> list[BridgeKeyUsageRow] | None:
        """Usage rows, oldest day first, each with its key's name; ``key`` (an id or a
        name) narrows them to one key (``None``: no key is called that). ``since`` and
        ``until`` are inclusive local dates."""
        names = {record.id: record.name for record in await self.store.list()}
        key_id = None
        if key is not None:
            key_id = next((i for i, n in names.items() if key in (i, n)), None)
            if key_id is None:
                return None
        rows = await self.store.usage(
            key_id=key_id, provider=provider, account=account, since=since, until=until
        )
        return [usage_row(row, names.get(row.key_id)) for row in rows]

    async def audit(self, key_id: str | None = None) -> list[BridgeKeyAuditEntry]:
        """Administration actions, oldest first."""
        return [audit_entry(entry) for entry in await self.store.audit(key_id=key_id)]
