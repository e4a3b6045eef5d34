"""Which failures move a call to the next account: only those where nothing ran.

A call may go to another account only when the backend refused it at the door, so no image
was made or billed:

* ``quota`` — the plan's usage limit is reached (``usage_limit_reached``, a 429 or the
  same code as the stream's first event), with no image data seen;
* ``rate_limited`` — a plain HTTP 429 (throttling) before any answer began;
* ``login`` — the login could not be read, or the backend refused it (HTTP 401 after the
  one refresh an own login gets, or HTTP 403) before any answer began;
* ``plan`` — the plan refused the call before any work: every carrier chat model refused
  (HTTP 400), or a ``not_included`` / entitlement refusal.

Anything else — above all an unknown outcome — stays on its account and is the caller's
answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from imagebridge.contract.enums import ProviderAttemptOutcome
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.response import ImageResponse, Normalization, ProviderAttempt
from imagebridge.providers.codex.wire import is_plan_model_refusal

__all__ = [
    "ACCOUNT_FAILOVER_WARNING",
    "Refusal",
    "Tried",
    "record_failover",
    "refusal_of",
    "tried_details",
]

ACCOUNT_FAILOVER_WARNING: Final = "account_failover_used"

Refusal = Literal["quota", "rate_limited", "login", "plan"]
_PLAN_WORDS: Final = ("not_included", "entitlement")


def refusal_of(error: BridgeError, *, answered: bool, output_seen: bool) -> Refusal | None:
    """The kind of refusal ``error`` is, or ``None`` when the call may not move on."""
    if error.outcome_unknown or output_seen:
        return None
    if error.code is ErrorCode.RATE_LIMITED and error.details.get("quota_exhausted") is True:
        return "quota"
    if answered:
        return None
    status = error.details.get("http_status")
    if error.code is ErrorCode.RATE_LIMITED and status == 429:
        return "rate_limited"
    if is_plan_model_refusal(error):
        return "plan"
    upstream = str(error.details.get("upstream_code", "")).lower()
    if error.code is ErrorCode.PERMISSION_DENIED and any(w in upstream for w in _PLAN_WORDS):
        return "plan"
    if error.code is ErrorCode.AUTHENTICATION and (status == 401 or status is None):
        return "login"
    if error.code is ErrorCode.PERMISSION_DENIED and status == 403:
        return "login"
    return None


@dataclass(frozen=True, slots=True)
class Tried:
    """An account that refused a call at the door, before the call moved on."""

    account: str
    error: BridgeError
    reason: Refusal
    duration_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {"account": self.account, "error_code": self.error.code.value, "reason": self.reason}


def tried_details(tried: Sequence[Tried]) -> list[dict[str, Any]]:
    """``details.accounts_tried`` of an error after the call moved."""
    return [entry.to_dict() for entry in tried]


def record_failover(response: ImageResponse, tried: Sequence[Tried], served: str) -> None:
    """What a response says about the accounts that refused its call, in the original's
    shapes: a failed ``attempts`` entry each (a refused carrier model is one already), a
    ``routing.account`` normalization (first account asked → the one that served) and
    the ``account_failover_used`` warning."""
    response.attempts.extend(
        ProviderAttempt(
            provider=response.provider,
            model=response.model,
            outcome=ProviderAttemptOutcome.FAILED,
            error_code=entry.error.code,
            duration_ms=entry.duration_ms,
        )
        for entry in tried
        if not is_plan_model_refusal(entry.error)
    )
    response.normalizations.append(
        Normalization(
            field="routing.account",
            requested=tried[0].account,
            effective=served,
            reason=f"account_{tried[0].reason}_refused",
        )
    )
    response.add_warning(ACCOUNT_FAILOVER_WARNING)
