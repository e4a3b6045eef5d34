"""When a failed call may be sent again, and how long to wait first.

The rules, in order: never after a possibly-executed call (``details.outcome ==
"unknown"``), never for an error the bridge did not mark ``retryable``, never for a
request that is not safe to repeat (a ``POST`` without an ``Idempotency-Key``), and
never when the bridge asks for a longer pause than :attr:`RetryPolicy.max_retry_after`.
Otherwise wait ``Retry-After`` when the bridge sent one, else an exponential backoff
with jitter.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from imagebridge.client._constants import (
    DEFAULT_INITIAL_RETRY_DELAY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_MAX_RETRY_DELAY,
)
from imagebridge.client._exceptions import BridgeAPIError
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many times, and how patiently, a retryable failure is tried again.

    ``RetryPolicy(max_retries=0)`` turns retries off (and with them the automatic
    ``Idempotency-Key``).
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    initial_delay: float = DEFAULT_INITIAL_RETRY_DELAY
    max_delay: float = DEFAULT_MAX_RETRY_DELAY
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not 0 <= self.max_retries <= 100:
            raise BridgeAPIError(
                ErrorCode.CONFIGURATION,
                "max_retries must be an integer between 0 and 100",
                details={"field": "max_retries"},
            )
        for name in ("initial_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise BridgeAPIError(
                    ErrorCode.CONFIGURATION,
                    f"{name} must be a finite number of seconds, zero or more",
                    details={"field": name},
                )

    @property
    def enabled(self) -> bool:
        return self.max_retries > 0

    def should_retry(
        self, error: BridgeError, *, attempt: int, repeatable: bool, retry_after: float | None
    ) -> bool:
        """Whether the failure of try number ``attempt`` (0-based) earns another try."""
        if attempt >= self.max_retries or not repeatable:
            return False
        if error.outcome_unknown or not error.retryable:
            return False
        return retry_after is None or retry_after <= self.max_retry_after

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before try ``attempt + 1``: the bridge's hint, else backoff."""
        if retry_after is not None:
            return max(0.0, retry_after)
        backoff = min(self.max_delay, self.initial_delay * (2.0**attempt))
        return backoff * (1.0 - 0.25 * random.random())
