"""One account of the Codex account pool: its login, and what the bridge knows about it now.

An account is a name plus a credentials loader (an own login the bridge refreshes, or a
codex home it only reads). Its state is what scheduling needs: the latest quota reading
(from ``wham/usage`` and from the windows every answer carries), until when it is out of
quota or refused, a circuit breaker per transport, the calls in flight and the calls and
failures of the last 24 hours. Nothing here holds a token, an e-mail or an account id:
the login is shown as a short hash of its account id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from imagebridge.contract.accounts import short_hash
from imagebridge.engine.breaker import BreakerConfig, BreakerState, CircuitBreaker
from imagebridge.providers.codex.auth import CodexCredentials, CredentialsLoader
from imagebridge.providers.codex.wire import IMAGE_LIMIT, QuotaSnapshot, QuotaWindow

__all__ = [
    "AccountSpec",
    "Blocker",
    "LoginKind",
    "PoolAccount",
    "RollingCounts",
    "image_windows",
]

LoginKind = Literal["own", "codex_home"]
UNREADABLE: Final = "login_unreadable"
_HOUR: Final = 3600
_DAY_HOURS: Final = 24


@dataclass(frozen=True, slots=True)
class AccountSpec:
    """A configured account: its name, how its login is read, and its limits."""

    name: str
    credentials: CredentialsLoader = field(repr=False)
    kind: LoginKind = "codex_home"
    codex_home: Path | None = field(default=None, repr=False)
    """The directory holding its ``auth.json`` (``None``: the bridge's own ``CODEX_HOME``)."""
    weight: int = 1
    max_concurrent: int | None = None


@dataclass(frozen=True, slots=True)
class Blocker:
    """Why an account may not take a call now, and until when (epoch seconds, if known)."""

    reason: str
    until: float | None = None
    code: str | None = None
    """The error code of the refusal that put it there, when one did."""

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "until": None if self.until is None else int(self.until)}


@dataclass(slots=True)
class RollingCounts:
    """Calls and failures per hour, for the last 24 hours."""

    buckets: dict[int, list[int]] = field(default_factory=dict)

    def add(self, now: float, *, failed: bool) -> None:
        hour = int(now // _HOUR)
        bucket = self.buckets.setdefault(hour, [0, 0])
        bucket[0] += 1
        if failed:
            bucket[1] += 1
        for old in [key for key in self.buckets if key <= hour - _DAY_HOURS]:
            del self.buckets[old]

    def totals(self, now: float) -> tuple[int, int]:
        """(calls, failures) in the 24 hours before ``now``."""
        first = int(now // _HOUR) - _DAY_HOURS + 1
        calls = failures = 0
        for hour, (count, failed) in self.buckets.items():
            if hour >= first:
                calls += count
                failures += failed
        return calls, failures


def image_windows(snapshot: QuotaSnapshot) -> tuple[QuotaWindow, ...]:
    """The windows that limit images: the separate image limit when the plan reports one,
    else every window (images then count against the plan's general limit)."""
    image = tuple(window for window in snapshot.windows if window.limit == IMAGE_LIMIT)
    return image or snapshot.windows


def _current(window: QuotaWindow, now: float) -> bool:
    """A window whose reset time has passed says nothing about now."""
    return window.resets_at is None or window.resets_at > now


class PoolAccount:
    """The live state of one account (shared by every Codex transport of the bridge)."""

    def __init__(
        self,
        spec: AccountSpec,
        *,
        breaker: Callable[[str], BreakerConfig],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.spec = spec
        self._breaker_config = breaker
        self._clock = clock
        self.snapshot: QuotaSnapshot | None = None
        self.exhausted_until: float | None = None
        """Out of quota (a refusal said so) until then."""
        self.cooling_until: float | None = None
        """Throttled (a plain 429) until then."""
        self.login_refused: Blocker | None = None
        """The backend refused the login (401/403: ``login_refused``), or it could not be
        read (``login_unreadable``, cleared as soon as it reads again), until ``until``."""
        self.plan_refused: dict[str, Blocker] = {}
        """Per transport: the plan refused it (no carrier model, no image feature)."""
        self.unsupported: dict[str, Blocker] = {}
        """Per transport: it never serves it (an own login is not given to a codex child)."""
        self.breakers: dict[str, CircuitBreaker] = {}
        self.in_flight = 0
        self.counts: dict[str, RollingCounts] = {}
        self.totals: dict[str, list[int]] = {}
        """Per transport: [succeeded, failed] calls since the bridge started (metrics)."""
        self.last_error: dict[str, str] = {}
        self.identity: str | None = None
        """``sha256:`` + 12 hex digits of the account id (or token), once a login was read."""

    @property
    def name(self) -> str:
        return self.spec.name

    def breaker(self, provider: str) -> CircuitBreaker:
        breaker = self.breakers.get(provider)
        if breaker is None:
            breaker = CircuitBreaker(f"{provider}:{self.name}", self._breaker_config(provider))
            self.breakers[provider] = breaker
        return breaker

    # -- what was learnt ---------------------------------------------------------------------

    async def load_credentials(self) -> CodexCredentials:
        """The account's login, read now (an own login is refreshed first when due)."""
        credentials = await self.spec.credentials()
        self.saw_credentials(credentials)
        return credentials

    def saw_credentials(self, credentials: CodexCredentials) -> None:
        identity = credentials.account_id or credentials.access_token
        self.identity = short_hash(identity)
        if self.login_refused is not None and self.login_refused.reason == UNREADABLE:
            self.login_refused = None  # it reads again; a refusal by the backend stays

    def observe(self, snapshot: QuotaSnapshot) -> None:
        """A quota reading from either source (headers merge in, ``wham/usage`` replaces)."""
        if self.snapshot is None or snapshot.source == "usage_endpoint":
            self.snapshot = snapshot
        else:
            self.snapshot = self.snapshot.merged_with(snapshot)

    def record(self, provider: str, *, error_code: str | None) -> None:
        now = self._clock()
        self.counts.setdefault(provider, RollingCounts()).add(now, failed=error_code is not None)
        self.totals.setdefault(provider, [0, 0])[0 if error_code is None else 1] += 1
        if error_code is None:
            self.last_error.pop(provider, None)
        else:
            self.last_error[provider] = error_code

    # -- what it means now ---------------------------------------------------------------------

    def remaining_percent(self, now: float | None = None) -> float | None:
        """What is left of the tightest image window (``None``: no reading yet)."""
        if self.snapshot is None:
            return None
        at = self._clock() if now is None else now
        windows = [w for w in image_windows(self.snapshot) if _current(w, at)]
        if not windows and image_windows(self.snapshot):
            return 100.0  # every window has reset since it was read
        if not windows:
            return None
        return max(0.0, 100.0 - max(window.used_percent for window in windows))

    def _full_windows(self, now: float) -> list[QuotaWindow]:
        if self.snapshot is None:
            return []
        return [
            window
            for window in image_windows(self.snapshot)
            if window.used_percent >= 100 and _current(window, now)
        ]

    def _reset_of(self, windows: list[QuotaWindow]) -> float | None:
        resets = [float(window.resets_at) for window in windows if window.resets_at is not None]
        return max(resets) if resets else None

    def blocker(self, provider: str, *, min_remaining_percent: int, now: float) -> Blocker | None:
        """Why this account may not take a call of ``provider`` now (``None``: it may)."""
        if provider in self.unsupported:
            return self.unsupported[provider]
        if self.login_refused is not None:
            until = self.login_refused.until
            if until is None or until > now:
                return self.login_refused
            self.login_refused = None
        plan = self.plan_refused.get(provider)
        if plan is not None:
            if plan.until is None or plan.until > now:
                return plan
            del self.plan_refused[provider]
        if self.exhausted_until is not None:
            if self.exhausted_until > now:
                return Blocker("quota_exhausted", self.exhausted_until, "rate_limited")
            self.exhausted_until = None
        full = self._full_windows(now)
        if full:
            return Blocker("quota_exhausted", self._reset_of(full), "rate_limited")
        if self.cooling_until is not None:
            if self.cooling_until > now:
                return Blocker("rate_limited", self.cooling_until, "rate_limited")
            self.cooling_until = None
        if min_remaining_percent > 0 and self.snapshot is not None:
            low = [
                window
                for window in image_windows(self.snapshot)
                if _current(window, now) and 100 - window.used_percent < min_remaining_percent
            ]
            if low:
                return Blocker("below_minimum", self._reset_of(low), "rate_limited")
        breaker = self.breakers.get(provider)
        if breaker is not None and breaker.state is BreakerState.OPEN:
            retry_ms = breaker.snapshot()["retry_after_ms"]
            if retry_ms > 0:
                return Blocker("breaker_open", now + retry_ms / 1000, "overloaded")
        return None

    def describe(
        self, provider: str, *, min_remaining_percent: int, explicit: bool
    ) -> dict[str, Any]:
        """For diagnostics: never a token, an e-mail or a whole account id."""
        now = self._clock()
        blocker = (
            self.blocker(provider, min_remaining_percent=min_remaining_percent, now=now)
            if explicit
            else None
        )
        calls, failures = self.counts.get(provider, RollingCounts()).totals(now)
        body: dict[str, Any] = {
            "name": self.name,
            "login": self.spec.kind,
            "login_id": self.identity,
            "ready": blocker is None,
            "reason": None if blocker is None else blocker.reason,
            "ready_at": None if blocker is None or blocker.until is None else int(blocker.until),
            "weight": self.spec.weight,
            "in_flight": self.in_flight,
            "max_concurrent": self.spec.max_concurrent,
            "calls_24h": calls,
            "failures_24h": failures,
            "last_error": self.last_error.get(provider),
            "quota": self._quota(now),
        }
        breaker = self.breakers.get(provider)
        if breaker is not None:
            body["breaker"] = breaker.snapshot()
        else:
            body["breaker"] = {"state": "closed", "consecutive_failures": 0}
        return body

    def _quota(self, now: float) -> dict[str, Any] | None:
        if self.snapshot is None:
            return None
        remaining = self.remaining_percent(now)
        return {
            "plan_type": self.snapshot.plan_type,
            "image_remaining_percent": None if remaining is None else round(remaining, 1),
            "source": self.snapshot.source,
            "observed_at": int(self.snapshot.observed_at),
            "image_windows": [window.to_dict() for window in image_windows(self.snapshot)],
        }
