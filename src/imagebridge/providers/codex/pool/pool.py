"""The account pool: which account takes the next upstream call.

Every Codex transport of one bridge draws from one pool; scheduling is per upstream call,
so a fan-out of ``n`` spreads its calls. :meth:`AccountPool.acquire` picks among the
*ready* accounts — not out of quota (until the window resets), not below
``min_remaining_percent`` of an image window, not throttled, not refused for their login
or plan (for ``refusal_cooldown``), breaker not open — by the policy:

* ``quota`` (default): the most image quota left (an account with no reading yet ranks
  with the best one read, as full when none is), then the fewest calls in flight, then
  the highest weight, then the one chosen longest ago;
* ``round_robin``: smooth weighted round robin over the ready accounts;
* ``primary_first``: the highest weight (then the configured order) while it is ready.

An account at its ``max_concurrent`` is passed over; when every ready account is full,
the call waits for a slot within its deadline. When no account is ready the call fails
at once, without an upstream call: ``rate_limited`` (``Retry-After`` at the earliest
reset) when quota or throttling is what blocks them, else the refusal that does.

Without ``[accounts.pool]`` the pool holds one implicit account (``$CODEX_HOME`` or
``accounts.active``) and decides nothing: every call goes to it, as before the pool
existed, and the engine's own breaker and admission gate are the only ones.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.breaker import BreakerConfig, BreakerPermit
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.interruption import wait_unless_interrupted
from imagebridge.engine.provider import AccountCounters
from imagebridge.providers.codex.pool.account import (
    UNREADABLE,
    AccountSpec,
    Blocker,
    PoolAccount,
)
from imagebridge.providers.codex.pool.failover import Refusal, Tried, refusal_of, tried_details

__all__ = ["POLICIES", "AccountLease", "AccountPool", "Policy", "PoolSettings"]

Policy = Literal["quota", "round_robin", "primary_first"]
POLICIES: Final[tuple[Policy, ...]] = ("quota", "round_robin", "primary_first")
_TIMED: Final = ("quota_exhausted", "below_minimum", "rate_limited")
_CAPACITY_POLL_S: Final = 1.0
_LOGIN_SUGGESTION: Final = (
    "Sign the refused accounts in again (`imagegen-bridge login --account NAME`, or "
    "`codex login` in their codex home), or add another account to [accounts.pool]."
)


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """``[accounts]`` scheduling keys as plain values."""

    policy: Policy = "quota"
    min_remaining_percent: int = 0
    refusal_cooldown_s: float = 300.0
    breakers: Mapping[str, BreakerConfig] = field(default_factory=dict)
    """Per transport name; the breaker of each of its accounts (default: ``breaker``)."""
    breaker: BreakerConfig = field(default_factory=BreakerConfig)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES or not 0 <= self.min_remaining_percent <= 100:
            raise BridgeError(ErrorCode.CONFIGURATION, "account pool settings are out of range")
        if self.refusal_cooldown_s <= 0:
            raise BridgeError(ErrorCode.CONFIGURATION, "account pool settings are out of range")


class AccountLease:
    """One upstream call's hold on an account: report how it went, then release it."""

    def __init__(
        self, pool: AccountPool, account: PoolAccount, provider: str, permit: BreakerPermit | None
    ) -> None:
        self.pool = pool
        self.account = account
        self.provider = provider
        self._permit = permit
        self._released = False

    @property
    def name(self) -> str:
        return self.account.name

    def succeeded(self) -> None:
        self.account.record(self.provider, error_code=None)
        self.account.plan_refused.pop(self.provider, None)
        if self._permit is not None:
            self._permit.finish(None)

    def failed(self, error: BridgeError, *, answered: bool, output_seen: bool) -> Refusal | None:
        """Record the failure; the refusal kind when the call may move to another account."""
        self.account.record(self.provider, error_code=error.code.value)
        refusal = refusal_of(error, answered=answered, output_seen=output_seen)
        if self._permit is not None:
            self._permit.finish(error)
        if refusal is not None and self.pool.explicit:
            self.pool.mark(self.account, self.provider, refusal, error)
            return refusal
        return None

    def abandon(self) -> None:
        if self._permit is not None:
            self._permit.abandon()

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.account.in_flight = max(0, self.account.in_flight - 1)
            self.pool._changed()


class AccountPool:
    """The accounts every Codex transport of one bridge draws from."""

    def __init__(
        self,
        accounts: Sequence[AccountSpec],
        settings: PoolSettings | None = None,
        *,
        explicit: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not accounts:
            raise BridgeError(ErrorCode.CONFIGURATION, "the account pool needs an account")
        names = [spec.name for spec in accounts]
        if len(set(names)) != len(names):
            raise BridgeError(ErrorCode.CONFIGURATION, "account names must be unique")
        self.settings = settings or PoolSettings()
        self.explicit = explicit
        """``False``: the one implicit account; nothing is skipped or waited for."""
        self.clock = clock
        self.accounts: tuple[PoolAccount, ...] = tuple(
            PoolAccount(spec, breaker=self._breaker_config, clock=self._now) for spec in accounts
        )
        self._by_name = {account.name: account for account in self.accounts}
        self._picks = itertools.count(1)
        self._picked: dict[str, int] = {}
        self._round_robin: dict[str, dict[str, int]] = {}
        self._waiters: list[asyncio.Future[None]] = []

    @classmethod
    def single(cls, spec: AccountSpec) -> AccountPool:
        """The pool of a bridge without ``[accounts.pool]``: one account, no scheduling."""
        return cls([spec], explicit=False)

    def _now(self) -> float:
        return self.clock()

    def _breaker_config(self, provider: str) -> BreakerConfig:
        return self.settings.breakers.get(provider, self.settings.breaker)

    @property
    def names(self) -> list[str]:
        return [account.name for account in self.accounts]

    @property
    def default(self) -> PoolAccount:
        """The first configured account (the only one without a pool)."""
        return self.accounts[0]

    def account(self, name: str) -> PoolAccount | None:
        return self._by_name.get(name)

    # -- choosing ------------------------------------------------------------------------------

    def blockers(self, provider: str) -> dict[str, Blocker]:
        """Every account that may not take a call of ``provider`` now, and why."""
        now = self._now()
        found: dict[str, Blocker] = {}
        for account in self.accounts:
            blocker = account.blocker(
                provider, min_remaining_percent=self.settings.min_remaining_percent, now=now
            )
            if blocker is not None:
                found[account.name] = blocker
        return found

    async def acquire(
        self,
        provider: str,
        *,
        deadline: Deadline,
        cancellation: CancelToken,
        tried: Sequence[Tried] = (),
        only: str | None = None,
    ) -> AccountLease:
        """A lease on the account that takes the next call of ``provider``.

        ``tried``: accounts that already refused this call (skipped; listed in the error
        when no account is left). ``only``: the one account the call must run on (a
        session bound to it); it fails when that account is not ready.
        """
        try:
            return await self._acquire(provider, deadline, cancellation, tried, only)
        except BridgeError as error:
            if tried:
                error.details["accounts_tried"] = tried_details(tried)
            raise error.with_provider(provider) from None

    async def _acquire(
        self,
        provider: str,
        deadline: Deadline,
        cancellation: CancelToken,
        tried: Sequence[Tried],
        only: str | None,
    ) -> AccountLease:
        skipped = {entry.account for entry in tried}
        if not self.explicit:
            account = self.default
            account.in_flight += 1
            return AccountLease(self, account, provider, None)
        while True:
            now = self._now()
            candidates = self.accounts if only is None else (self._require(only),)
            ready: list[PoolAccount] = []
            blocked: dict[str, Blocker] = {}
            for account in candidates:
                blocker = account.blocker(
                    provider, min_remaining_percent=self.settings.min_remaining_percent, now=now
                )
                if blocker is None and account.name in skipped:
                    blocker = Blocker("refused", None)
                if blocker is None:
                    ready.append(account)
                else:
                    blocked[account.name] = blocker
            if not ready:
                raise self._none_ready(blocked, now, only=only)
            free = [account for account in ready if _has_room(account)]
            for account in self._order(free, provider):
                try:
                    permit = account.breaker(provider).acquire()
                except BridgeError:
                    continue  # half-open with its probe out: try the next one
                account.in_flight += 1
                self._picked[account.name] = next(self._picks)
                return AccountLease(self, account, provider, permit)
            await self._wait_for_room(deadline, cancellation)

    def _require(self, name: str) -> PoolAccount:
        account = self._by_name.get(name)
        if account is None:
            raise BridgeError(
                ErrorCode.SESSION,
                f"The session is bound to the account '{name}', which is not in the pool.",
                details={"account": name, "reason": "account_not_configured"},
                suggestions=(
                    f"Add [accounts.pool.{name}] back, or delete the session to start over.",
                ),
            )
        return account

    def _order(self, accounts: list[PoolAccount], provider: str) -> list[PoolAccount]:
        if len(accounts) <= 1:
            return accounts
        index = {account.name: n for n, account in enumerate(self.accounts)}
        policy = self.settings.policy
        if policy == "primary_first":
            return sorted(accounts, key=lambda a: (-a.spec.weight, index[a.name]))
        if policy == "round_robin":
            return self._weighted_round_robin(accounts, provider)
        now = self._now()
        readings = [account.remaining_percent(now) for account in accounts]
        known = [math.floor(remaining) for remaining in readings if remaining is not None]
        # An account not read yet ranks with the best one read (full when none is): a reading
        # that arrives in the background then reorders only an account it shows worse off.
        unread = max(known, default=100)

        def by_quota(account: PoolAccount) -> tuple[float, int, int, int]:
            remaining = account.remaining_percent(now)
            left = unread if remaining is None else math.floor(remaining)
            return (
                -left,
                account.in_flight,
                -account.spec.weight,
                self._picked.get(account.name, 0),
            )

        return sorted(accounts, key=by_quota)

    def _weighted_round_robin(
        self, accounts: list[PoolAccount], provider: str
    ) -> list[PoolAccount]:
        """Smooth weighted round robin (each pick: add weights, take the top, subtract total)."""
        current = self._round_robin.setdefault(provider, {})
        total = sum(account.spec.weight for account in accounts)
        for account in accounts:
            current[account.name] = current.get(account.name, 0) + account.spec.weight
        ordered = sorted(accounts, key=lambda a: -current[a.name])
        current[ordered[0].name] -= total
        return ordered

    async def _wait_for_room(self, deadline: Deadline, cancellation: CancelToken) -> None:
        """Until a slot frees up (or a second passes: a blocked account may come back)."""
        if deadline.expired:
            raise BridgeError(
                ErrorCode.TIMEOUT,
                "The request deadline elapsed while every ready account was busy.",
                retryable=True,
                details={"limit": "accounts.pool.max_concurrent"},
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await wait_unless_interrupted(
                waiter, cancellation, min(deadline.remaining(), _CAPACITY_POLL_S)
            )
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            waiter.cancel()
        if cancellation.cancelled:
            raise BridgeError(
                ErrorCode.CANCELLED, "The request was cancelled while waiting for an account."
            )

    def _changed(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- learning ------------------------------------------------------------------------------

    def mark(
        self, account: PoolAccount, provider: str, refusal: Refusal, error: BridgeError
    ) -> None:
        """Take ``account`` out of rotation after ``refusal`` (until its reset or cooldown)."""
        now = self._now()
        cooldown = now + self.settings.refusal_cooldown_s
        told = _told_until(error, now)
        if refusal == "quota":
            account.exhausted_until = told if told is not None else cooldown
        elif refusal == "rate_limited":
            account.cooling_until = told if told is not None else cooldown
        elif refusal == "login":
            reason = "login_refused" if "http_status" in error.details else UNREADABLE
            account.login_refused = Blocker(reason, cooldown, error.code.value)
        else:
            account.plan_refused[provider] = Blocker("plan_refused", cooldown, error.code.value)

    def login_failed(self, account: PoolAccount, error: BridgeError, *, read: bool = True) -> None:
        """A readiness probe found ``account``'s login unusable: skip it for the cooldown.

        ``read``: the login file could not be read (ends as soon as it reads again);
        otherwise codex or the backend refused it."""
        if self.explicit and error.code is ErrorCode.AUTHENTICATION:
            until = self._now() + self.settings.refusal_cooldown_s
            reason = UNREADABLE if read else "login_refused"
            account.login_refused = Blocker(reason, until, error.code.value)

    # -- when nothing is ready ---------------------------------------------------------------

    def _none_ready(
        self, blocked: Mapping[str, Blocker], now: float, *, only: str | None
    ) -> BridgeError:
        details: dict[str, Any] = {"accounts": {name: b.to_dict() for name, b in blocked.items()}}
        if only is not None:
            details["account"] = only
        timed = [b for b in blocked.values() if b.reason in _TIMED]
        breakers = [b for b in blocked.values() if b.reason == "breaker_open"]
        one = only is not None
        if timed:
            if any(b.reason != "rate_limited" for b in timed):
                details["quota_exhausted"] = True
            self._retry_at(details, timed, now)
            return BridgeError(
                ErrorCode.RATE_LIMITED,
                f"The account '{only}' has no image quota left now."
                if one
                else "No account of the pool has image quota left now.",
                retryable=True,
                details=details,
            )
        if breakers:
            details["circuit_state"] = "open"
            self._retry_at(details, breakers, now)
            return BridgeError(
                ErrorCode.OVERLOADED,
                f"The account '{only}' is not available: its circuit breaker is open."
                if one
                else "No account of the pool is available: their circuit breakers are open.",
                retryable=True,
                details=details,
            )
        codes = sorted({b.code for b in blocked.values() if b.code})
        code = ErrorCode(codes[0]) if len(codes) == 1 else ErrorCode.AUTHENTICATION
        return BridgeError(
            code,
            f"The account '{only}' cannot take the call: its login or plan was refused."
            if one
            else "No account of the pool can take the call: their logins or plans were refused.",
            details=details,
            suggestions=(_LOGIN_SUGGESTION,),
        )

    def _retry_at(self, details: dict[str, Any], blockers: list[Blocker], now: float) -> None:
        times = [b.until for b in blockers if b.until is not None]
        earliest = min(times) if times else now + self.settings.refusal_cooldown_s
        details["resets_at"] = math.ceil(earliest)
        details["retry_after_ms"] = max(0, math.ceil((earliest - now) * 1000))

    # -- diagnostics ---------------------------------------------------------------------------

    def counters(self, provider: str) -> list[AccountCounters]:
        """Per account, for metrics: ready now, in flight, calls since start."""
        blocked = self.blockers(provider)
        return [
            AccountCounters(
                account=account.name,
                ready=account.name not in blocked,
                in_flight=account.in_flight,
                succeeded=account.totals.get(provider, [0, 0])[0],
                failed=account.totals.get(provider, [0, 0])[1],
            )
            for account in self.accounts
        ]

    def describe(self, provider: str) -> dict[str, Any]:
        """The pool as one transport sees it (never a token, e-mail or whole account id)."""
        minimum = self.settings.min_remaining_percent
        accounts = [
            account.describe(provider, min_remaining_percent=minimum, explicit=self.explicit)
            for account in self.accounts
        ]
        return {
            "pool": self.explicit,
            "policy": self.settings.policy if self.explicit else None,
            "min_remaining_percent": minimum if self.explicit else None,
            "ready": sum(1 for account in accounts if account["ready"]),
            "accounts": accounts,
        }


def _has_room(account: PoolAccount) -> bool:
    limit = account.spec.max_concurrent
    return limit is None or account.in_flight < limit


def _told_until(error: BridgeError, now: float) -> float | None:
    """When the backend said the refusal ends: ``resets_at``, else ``retry_after_ms``."""
    resets_at = error.details.get("resets_at")
    if isinstance(resets_at, int | float) and not isinstance(resets_at, bool) and resets_at > now:
        return float(resets_at)
    retry_ms = error.details.get("retry_after_ms")
    if isinstance(retry_ms, int) and not isinstance(retry_ms, bool) and retry_ms > 0:
        return now + retry_ms / 1000
    return None
