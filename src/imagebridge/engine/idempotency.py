"""In-memory idempotency for synchronous requests.

One leader runs a keyed request; concurrent duplicates wait for its result; a completed
response replays byte-for-byte; an outcome nobody can know (the upstream call may have run)
is remembered as a tombstone so a retry can never bill twice. Only hashes of keys are kept.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken, Deadline

__all__ = [
    "IdempotencyConfig",
    "IdempotencyCoordinator",
    "IdempotencyLease",
    "request_fingerprint",
]

_MAX_SCOPE_BYTES = 256
_ENTRY_OVERHEAD = 256


def request_fingerprint(request: ImageRequest) -> str:
    """SHA-256 of the normalized request without its key and timeout."""
    canonical = json.dumps(
        request.fingerprint_payload(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class IdempotencyConfig:
    max_entries: int = 10_000
    max_completed_bytes: int = 256 * 1024 * 1024
    completed_ttl_secs: float = 86_400
    in_flight_ttl_secs: float = 1_860
    unknown_ttl_secs: float = 86_400


@dataclass(slots=True)
class _Entry:
    fingerprint: str
    created: float
    expires: float
    accessed: int
    state: str  # pending | completed | failed
    waiters: asyncio.Future[ImageResponse] | None = None
    response: ImageResponse | None = None
    error: BridgeError | None = None
    weight: int = 0


@dataclass(slots=True)
class IdempotencyLease:
    """The leader's handle: settle it with :meth:`IdempotencyCoordinator.complete` or ``fail``."""

    record: str
    fingerprint: str
    settled: bool = field(default=False)


class IdempotencyCoordinator:
    def __init__(
        self, config: IdempotencyConfig, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if (
            min(
                config.max_entries,
                config.max_completed_bytes,
                config.completed_ttl_secs,
                config.in_flight_ttl_secs,
                config.unknown_ttl_secs,
            )
            <= 0
        ):
            raise BridgeError(ErrorCode.CONFIGURATION, "idempotency limits must be positive")
        self.config = config
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._completed_bytes = 0
        self._access = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def completed_bytes(self) -> int:
        return self._completed_bytes

    @staticmethod
    def _record(scope: str, key: str) -> str:
        if not scope or len(scope.encode()) > _MAX_SCOPE_BYTES or any(ord(c) < 32 for c in scope):
            raise BridgeError.invalid_request("invalid idempotency scope")
        return hashlib.sha256(f"{scope}\x00{key}".encode()).hexdigest()

    def _touch(self) -> int:
        self._access += 1
        return self._access

    def _drop(self, record: str) -> None:
        entry = self._entries.pop(record, None)
        if entry is not None and entry.state == "completed":
            self._completed_bytes -= entry.weight

    def _cleanup(self) -> None:
        now = self._clock()
        for record, entry in list(self._entries.items()):
            if entry.state == "pending":
                if now - entry.created >= self.config.in_flight_ttl_secs:
                    self._drop(record)
                    if entry.waiters is not None and not entry.waiters.done():
                        entry.waiters.set_exception(
                            BridgeError(
                                ErrorCode.TIMEOUT, "idempotent operation expired", retryable=True
                            )
                        )
            elif entry.expires <= now:
                self._drop(record)

    def _evict_one(self, keep: str | None = None) -> bool:
        candidates = [
            (entry.accessed, record)
            for record, entry in self._entries.items()
            if entry.state == "completed" and entry.response is not None and record != keep
        ]
        if not candidates:
            return False
        _, victim = min(candidates)
        self._drop(victim)
        return True

    async def begin(
        self,
        scope: str,
        key: str,
        fingerprint: str,
        deadline: Deadline,
        cancellation: CancelToken,
    ) -> IdempotencyLease | ImageResponse:
        """Become the leader (a lease) or get the replayed/awaited response.

        Raises the stored error for failed or unknown outcomes, and
        ``idempotency_conflict`` when the key was used for a different request.
        """
        self._cleanup()
        record = self._record(scope, key)
        entry = self._entries.get(record)
        if entry is not None:
            entry.accessed = self._touch()
            if entry.fingerprint != fingerprint:
                raise BridgeError(
                    ErrorCode.IDEMPOTENCY_CONFLICT,
                    "idempotency key was already used for a different request",
                )
            if entry.state == "completed":
                if entry.response is not None:
                    return entry.response.model_copy(deep=True)
                assert entry.error is not None
                raise entry.error.copy()
            if entry.state == "failed":
                assert entry.error is not None
                raise entry.error.copy()
            assert entry.waiters is not None
            return await self._wait(entry.waiters, deadline, cancellation)
        while len(self._entries) >= self.config.max_entries:
            if not self._evict_one():
                raise BridgeError(
                    ErrorCode.OVERLOADED, "idempotency capacity is exhausted", retryable=True
                )
        now = self._clock()
        waiters: asyncio.Future[ImageResponse] = asyncio.get_running_loop().create_future()
        self._entries[record] = _Entry(
            fingerprint=fingerprint,
            created=now,
            expires=now + self.config.in_flight_ttl_secs,
            accessed=self._touch(),
            state="pending",
            waiters=waiters,
        )
        return IdempotencyLease(record, fingerprint)

    @staticmethod
    async def _wait(
        waiters: asyncio.Future[ImageResponse], deadline: Deadline, cancellation: CancelToken
    ) -> ImageResponse:
        cancelled: asyncio.Future[None] = asyncio.ensure_future(cancellation.wait())
        watched: set[asyncio.Future[Any]] = {waiters, cancelled}
        try:
            await asyncio.wait(
                watched,
                timeout=deadline.remaining(),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            cancelled.cancel()
        if waiters.done():
            if waiters.exception() is not None:
                error = waiters.exception()
                assert isinstance(error, BridgeError)
                raise error.copy()
            return waiters.result().model_copy(deep=True)
        if cancellation.cancelled:
            raise BridgeError(
                ErrorCode.CANCELLED, "request was cancelled while waiting for idempotent result"
            )
        raise BridgeError(
            ErrorCode.TIMEOUT, "request deadline elapsed while waiting for idempotent result"
        )

    def complete(self, lease: IdempotencyLease, response: ImageResponse) -> None:
        if lease.settled:
            return
        lease.settled = True
        entry = self._entries.get(lease.record)
        if entry is None or entry.fingerprint != lease.fingerprint or entry.state != "pending":
            return
        waiters = entry.waiters
        weight = len(response.model_dump_json()) + _ENTRY_OVERHEAD
        now = self._clock()
        fits = weight <= self.config.max_completed_bytes
        while fits and self._completed_bytes + weight > self.config.max_completed_bytes:
            if not self._evict_one(keep=lease.record):
                fits = False
        entry.state = "completed"
        entry.expires = now + self.config.completed_ttl_secs
        entry.waiters = None
        if fits:
            entry.response = response.model_copy(deep=True)
            entry.weight = weight
            self._completed_bytes += weight
        else:
            entry.error = BridgeError(
                ErrorCode.OVERLOADED,
                "completed response is too large for idempotent replay",
                details={"outcome": "completed_unreplayable"},
            )
        if waiters is not None and not waiters.done():
            waiters.set_result(response)

    def fail(self, lease: IdempotencyLease, error: BridgeError) -> None:
        if lease.settled:
            return
        lease.settled = True
        entry = self._entries.get(lease.record)
        if entry is None or entry.fingerprint != lease.fingerprint or entry.state != "pending":
            return
        waiters = entry.waiters
        if error.outcome_unknown:
            stored = error.copy().mark_unknown_outcome()
            entry.state = "failed"
            entry.error = stored
            entry.waiters = None
            entry.expires = self._clock() + self.config.unknown_ttl_secs
        else:
            self._drop(lease.record)
        if waiters is not None and not waiters.done():
            waiters.set_exception(error.copy())
            waiters.exception()  # mark retrieved: nobody may be waiting

    def snapshot(self) -> dict[str, Any]:
        return {"entries": len(self._entries), "completed_bytes": self._completed_bytes}
