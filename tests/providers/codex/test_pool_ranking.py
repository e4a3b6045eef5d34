"""The ``quota`` policy's ranking, on the pool alone: what a reading does to the order.

Readings arrive in the background (``wham/usage``) and with each answer's headers, so an
account may be read before another. An account not read yet ranks with the best one read:
a reading moves only the account it shows worse off, never the one still unknown.
"""

from __future__ import annotations

from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.providers.codex.auth import load_codex_credentials_async
from imagebridge.providers.codex.pool import AccountPool, AccountSpec, PoolAccount
from imagebridge.providers.codex.wire import QuotaSnapshot, QuotaWindow

PROVIDER = "codex-responses"


def pool(*names: str) -> AccountPool:
    return AccountPool([AccountSpec(name, load_codex_credentials_async) for name in names])


def reading(used_percent: float) -> QuotaSnapshot:
    window = QuotaWindow(name="primary", used_percent=used_percent, window_minutes=300)
    return QuotaSnapshot(windows=(window,), observed_at=0.0)


def named(accounts: AccountPool, name: str) -> PoolAccount:
    found = accounts.account(name)
    assert found is not None
    return found


async def take(accounts: AccountPool) -> str:
    """The account the next call goes to (its lease released at once)."""
    lease = await accounts.acquire(
        PROVIDER, deadline=Deadline.after(5.0), cancellation=CancelToken()
    )
    lease.release()
    return lease.account.name


async def test_an_unread_account_ranks_with_the_best_one_read() -> None:
    accounts = pool("alpha", "beta")
    assert await take(accounts) == "alpha"
    # beta is read first (40 % left); alpha, chosen last, has no reading yet: they tie,
    # and the one chosen longest ago goes next.
    named(accounts, "beta").observe(reading(60.0))
    assert await take(accounts) == "beta"
    assert await take(accounts) == "alpha"


async def test_a_reading_that_shows_an_account_worse_off_moves_it_back() -> None:
    accounts = pool("alpha", "beta", "gamma")
    named(accounts, "alpha").observe(reading(20.0))
    named(accounts, "beta").observe(reading(70.0))
    # gamma is unread: it ranks with alpha (80 % left), before beta (30 %)
    assert [await take(accounts) for _ in range(3)] == ["alpha", "gamma", "alpha"]


async def test_with_no_reading_at_all_equal_accounts_alternate() -> None:
    accounts = pool("alpha", "beta")
    assert [await take(accounts) for _ in range(4)] == ["alpha", "beta", "alpha", "beta"]
