"""One request's charge on a key's quota, as one ``async with`` (docs/keys.md, quota rules).

Both execution paths — an HTTP image request and a key's job when it runs — charge a key
the same way::

    async with keys.charge(key, request, default_provider=..., slot_wait_s=...) as charge:
        response = await run(request)
        charge.record(response)

Entering checks the providers the request may run on (the route and every fallback)
against the key's allow-list (403, nothing held), takes a ``max_concurrent`` slot within
``slot_wait_s`` when one is asked for (429 past it, nothing reserved), and reserves the
request's ``n`` images on every window (429 when one lacks room; the slot is given back).

Leaving settles the outcome the block recorded — a :class:`BridgeError` raised out of the
block counts as recorded: images not delivered are given back, unless the outcome is
unknown (the upstream call may have run and been billed: the reservation is kept), and the
usage is counted per pool account — then gives the slot back, always. A block left any
other way (cancelled, or without an outcome) settles nothing: like an unknown outcome, the
reservation is kept, and no usage is counted.
"""

from __future__ import annotations

import contextlib
import logging
from types import TracebackType
from typing import TYPE_CHECKING

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.served import served_by
from imagebridge.keys.quota import Reservation
from imagebridge.keys.slots import KeySlot
from imagebridge.storage.records import KeyRecord

if TYPE_CHECKING:
    from imagebridge.keys.service import KeyService

__all__ = ["QuotaCharge"]

logger = logging.getLogger(__name__)


class QuotaCharge:
    """check providers → slot → reserve, then settle → release (see the module docstring)."""

    def __init__(
        self,
        keys: KeyService,
        key: KeyRecord,
        request: ImageRequest,
        *,
        default_provider: str,
        slot_wait_s: float | None = None,
    ) -> None:
        self._keys = keys
        self._key = key
        self._request = request
        self._provider = request.routing.provider or default_provider
        self._slot_wait_s = slot_wait_s
        self._slot: KeySlot | None = None
        self._reservation: Reservation | None = None
        self._outcome: ImageResponse | BridgeError | None = None
        self._kept = False
        self.counters: KeyRecord | None = None
        """The key as this charge last read it: after the reservation, its refusal or the
        settlement (``None`` before any), for the caller's quota headers."""

    @property
    def key(self) -> KeyRecord:
        """The key this charge is on."""
        return self._key

    def record(self, outcome: ImageResponse | BridgeError, *, kept: bool = False) -> None:
        """How the call ended: its response, or the error it ended with. ``kept``: the
        caller had gone and the images went to the history (usage rows say ``kept``)."""
        self._outcome = outcome
        self._kept = kept

    async def __aenter__(self) -> QuotaCharge:
        keys, key = self._keys, self._key
        keys.check_provider(key, self._provider)
        for route in self._request.routing.fallbacks:
            keys.check_provider(key, route.provider)
        if self._slot_wait_s is not None:
            self._slot = await keys.acquire_slot(key, self._slot_wait_s)
        try:
            self._reservation = await keys.reserve(key, self._request.parameters.n)
        except BaseException as refused:
            if isinstance(refused, BridgeError):
                with contextlib.suppress(BridgeError):  # the refusal shows the counters now
                    self.counters = await keys.get(key.id)
            await self._release()
            raise
        self.counters = self._reservation.key
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._outcome is None and isinstance(error, BridgeError):
                self._outcome = error
            if self._outcome is not None:
                await self._settle(self._outcome)
        finally:
            await self._release()

    async def _release(self) -> None:
        slot, self._slot = self._slot, None
        if slot is not None:
            await self._keys.release_slot(slot)

    async def _settle(self, outcome: ImageResponse | BridgeError) -> None:
        """Settle the reservation; a store failure is logged, never the caller's answer."""
        reservation = self._reservation
        assert reservation is not None
        try:
            if isinstance(outcome, ImageResponse):
                usage = outcome.usage
                settled = await self._keys.settle(
                    reservation,
                    delivered=len(outcome.data),
                    unknown=False,
                    provider=outcome.provider,
                    served_by=served_by(outcome),
                    total_tokens=(usage.total_tokens or 0) if usage is not None else 0,
                    kept=self._kept,
                )
            else:
                account = outcome.details.get("account")
                settled = await self._keys.settle(
                    reservation,
                    delivered=0,
                    unknown=outcome.outcome_unknown,
                    provider=outcome.provider or self._provider,
                    account=account if isinstance(account, str) else None,
                )
        except BridgeError as failure:
            logger.error(
                "could not settle an API key's reservation",
                extra={"code": failure.code.value, "key_prefix": reservation.key.prefix},
            )
            return
        self.counters = settled
