"""The one bounded transient retry of the Codex providers, stricter than the original's.

A retry may only repeat a call that provably produced nothing: the failure is retryable,
its outcome is known (never ``outcome=unknown``), no image data of that attempt reached
the caller, and its code is ``rate_limited``, ``overloaded`` or ``upstream``. An
exhausted plan quota (``details.quota_exhausted``) is never retried: it will not clear in
a second, and users read a retried quota 429 as a second billed attempt. A plain 429
that asks for a longer wait than the backoff is handed to the caller with its
``Retry-After`` instead of being slept on inside the bridge.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.cancellation import CancelToken

__all__ = ["RETRY_WARNING", "TransientRetryPolicy", "sleep_unless_cancelled"]

RETRY_WARNING: Final = "transient_provider_retry_used"
_RETRYABLE_CODES: Final = frozenset(
    {ErrorCode.RATE_LIMITED, ErrorCode.OVERLOADED, ErrorCode.UPSTREAM}
)


@dataclass(frozen=True, slots=True)
class TransientRetryPolicy:
    """``max_attempts`` calls at most (1 or 2), ``backoff_ms`` × attempt number between them."""

    max_attempts: int = 2
    backoff_ms: int = 750

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= 2 or not 0 <= self.backoff_ms <= 30_000:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "transient retry settings are out of range",
                details={"field": "providers.codex_responses.max_transient_attempts"},
            )

    def delay_before_next(
        self, error: BridgeError, attempt: int, *, output_seen: bool, remaining_s: float
    ) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or ``None`` when it may not run."""
        if attempt >= self.max_attempts or output_seen:
            return None
        if not error.retryable or error.outcome_unknown or error.code not in _RETRYABLE_CODES:
            return None
        if error.details.get("quota_exhausted") is True:
            return None
        delay = self.backoff_ms * attempt / 1000
        asked = error.details.get("retry_after_ms")
        if (
            error.code is ErrorCode.RATE_LIMITED
            and isinstance(asked, int)
            and not isinstance(asked, bool)
            and asked / 1000 > delay
        ):
            return None
        if remaining_s <= delay:
            return None
        return delay


async def sleep_unless_cancelled(seconds: float, token: CancelToken) -> bool:
    """Sleep ``seconds``; ``False`` as soon as ``token`` is cancelled."""
    if token.cancelled:
        return False
    if seconds <= 0:
        return True
    waiter = asyncio.ensure_future(token.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=seconds)
    finally:
        waiter.cancel()
    return not done
