"""Running one call on the account pool: lease an account, move on only after a refusal.

Each call runs on an account of the pool (:mod:`imagebridge.providers.codex.pool`): one
implicit account without ``[accounts.pool]``, else the one the pool's policy picks. A refusal
at the door (quota, throttling, login, plan: :mod:`.pool.failover` says which) moves the call
to the next ready account; nothing else does, and never an unknown outcome. An error that
ends the call names, with a pool, the account it failed on and those that refused before it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from imagebridge.contract.errors import BridgeError
from imagebridge.engine.provider import ProviderContext
from imagebridge.providers.codex.guarded_call import CallResult, CallState
from imagebridge.providers.codex.pool import AccountLease, AccountPool, Tried, tried_details

__all__ = ["CallTally", "RunOnAccount", "Served", "serve_on_accounts"]

logger = logging.getLogger("imagebridge.providers.codex")


@dataclass(slots=True)
class CallTally:
    """The upstream calls one provider call made, on every account."""

    calls: int = 0
    """Upstream calls made (refused carriers and retries included)."""
    repeated: bool = False
    """A call was repeated on one account (the transient retry, or after a refresh)."""


@dataclass(frozen=True, slots=True)
class Served:
    """What one call produced, how many upstream calls it took and on which account."""

    result: CallResult
    calls: int
    """Upstream calls made, on every account (refused carriers and retries included)."""
    repeated: bool
    """A call was repeated on one account (the transient retry, or after a refresh)."""
    account: str
    tried: tuple[Tried, ...] = ()


RunOnAccount = Callable[[AccountLease, list[CallState], CallTally], Awaitable[CallResult]]
"""The call on one leased account: it appends each upstream call's :class:`CallState` and
counts the calls in the tally."""


async def serve_on_accounts(
    pool: AccountPool, provider: str, context: ProviderContext, run: RunOnAccount
) -> Served:
    """Run ``run`` on the pool's accounts until one serves it or it may not move on."""
    tried: list[Tried] = []
    tally = CallTally()
    while True:
        lease = await _lease(pool, provider, context, tried, tally.calls)
        began = time.monotonic()
        states: list[CallState] = []
        try:
            result = await run(lease, states, tally)
        except BridgeError as error:
            last = states[-1] if states else CallState()
            refusal = lease.failed(
                error,
                answered=last.answered,
                output_seen=any(state.output_seen for state in states),
            )
            if refusal is None:
                raise _on_account(pool, error, lease, tried) from None
            tried.append(Tried(lease.name, error, refusal, _ms_since(began)))
            logger.info(
                "%s: account %s refused the call (%s); trying the next account",
                provider,
                lease.name,
                refusal,
            )
            continue
        except BaseException:
            lease.abandon()
            raise
        else:
            lease.succeeded()
            return Served(result, tally.calls, tally.repeated, lease.name, tuple(tried))
        finally:
            lease.release()


async def _lease(
    pool: AccountPool,
    provider: str,
    context: ProviderContext,
    tried: list[Tried],
    calls: int,
) -> AccountLease:
    try:
        return await pool.acquire(
            provider,
            deadline=context.deadline,
            cancellation=context.cancellation,
            tried=tried,
        )
    except BridgeError as error:
        if tried:
            error.details["provider_attempts"] = calls
        raise


def _on_account(
    pool: AccountPool, error: BridgeError, lease: AccountLease, tried: list[Tried]
) -> BridgeError:
    """With a pool, say which account failed and which refused before it."""
    if pool.explicit:
        error.details["account"] = lease.name
        if tried:
            error.details["accounts_tried"] = tried_details(tried)
    return error


def _ms_since(started: float) -> int:
    return max(0, int((time.monotonic() - started) * 1000))
