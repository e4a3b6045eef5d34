"""Every pool account's quota reading, as one Codex HTTP provider keeps them: from each
answer's headers, read in the background when stale (never twice at once), and on demand."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import CodexCredentials
from imagebridge.providers.codex.http import CodexHttpClient
from imagebridge.providers.codex.pool import AccountPool, AccountSpec, PoolAccount
from imagebridge.providers.codex.quota_readings import QuotaReadings
from imagebridge.providers.codex.wire import QuotaSnapshot
from tests.support.codex_backend import (
    CodexBackend,
    codex_backend_fixture,  # noqa: F401 - registers the `codex_backend` fixture
)

TOKENS = {"alpha": "tok-alpha-SECRET-1", "beta": "tok-beta-SECRET-2"}
PROVIDER = "codex-responses"


def login(token: str) -> Callable[[], Awaitable[CodexCredentials]]:
    async def load() -> CodexCredentials:
        return CodexCredentials(token)

    return load


def pool(*names: str, explicit: bool = True) -> AccountPool:
    specs = [AccountSpec(name, login(TOKENS[name])) for name in names]
    return AccountPool(specs, explicit=explicit)


def account(accounts: AccountPool, name: str) -> PoolAccount:
    found = accounts.account(name)
    assert found is not None
    return found


def used(account: PoolAccount) -> float | None:
    snapshot = account.snapshot
    return None if snapshot is None else snapshot.windows[0].used_percent


class Readings(QuotaReadings):
    """The provider's readings, and an event set once every account named was read."""

    def __init__(self, backend: CodexBackend, http: CodexHttpClient, *names: str) -> None:
        super().__init__(http, backend.usage_url, cache_ms=30_000)
        self.all_read = asyncio.Event()
        self._unread = set(names)

    def observe(self, account: PoolAccount, snapshot: QuotaSnapshot | None) -> None:  # type: ignore[override]
        super().observe(account, snapshot)
        self._unread.discard(account.name)
        if not self._unread:
            self.all_read.set()


@pytest.fixture
async def http() -> AsyncIterator[CodexHttpClient]:
    client = CodexHttpClient()
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def readings(codex_backend: CodexBackend, http: CodexHttpClient) -> AsyncIterator[Readings]:
    kept = Readings(codex_backend, http, "alpha", "beta")
    try:
        yield kept
    finally:
        await kept.close()


def test_an_answers_headers_feed_the_reading_of_its_account_only(readings: Readings) -> None:
    accounts = pool("alpha", "beta")
    headers = httpx.Headers(
        {"x-codex-primary-used-percent": "64", "x-codex-primary-window-minutes": "300"}
    )
    readings.learn(account(accounts, "alpha"), headers)
    assert used(account(accounts, "alpha")) == 64.0
    assert used(account(accounts, "beta")) is None


async def test_stale_accounts_are_read_in_the_background_once_each(
    readings: Readings, codex_backend: CodexBackend
) -> None:
    codex_backend.login(TOKENS["alpha"]).quota.primary_used_percent = 20.0
    codex_backend.login(TOKENS["beta"]).quota.primary_used_percent = 70.0
    accounts = pool("alpha", "beta")
    readings.refresh_stale(accounts)
    readings.refresh_stale(accounts)  # asked twice: each account is still read once
    async with asyncio.timeout(10):
        await readings.all_read.wait()
    assert (used(account(accounts, "alpha")), used(account(accounts, "beta"))) == (20.0, 70.0)
    running = len(asyncio.all_tasks())
    readings.refresh_stale(accounts)  # both fresh now: nothing is read
    assert len(asyncio.all_tasks()) == running
    assert {name: codex_backend.calls_by(token, "usage") for name, token in TOKENS.items()} == {
        "alpha": 1,
        "beta": 1,
    }


async def test_without_a_pool_nothing_is_read_in_the_background(
    readings: Readings, codex_backend: CodexBackend
) -> None:
    running = len(asyncio.all_tasks())
    readings.refresh_stale(pool("alpha", explicit=False))
    assert len(asyncio.all_tasks()) == running  # no reading started
    assert codex_backend.calls("usage") == 0
    assert not readings.all_read.is_set()


async def test_a_refresh_reads_every_account_and_reports_the_first_failure(
    readings: Readings, codex_backend: CodexBackend
) -> None:
    async def no_login() -> CodexCredentials:
        raise BridgeError(ErrorCode.AUTHENTICATION, "no login")

    codex_backend.login(TOKENS["beta"]).quota.primary_used_percent = 33.0
    accounts = AccountPool(
        [AccountSpec("alpha", no_login), AccountSpec("beta", login(TOKENS["beta"]))]
    )
    failed = await readings.refresh(accounts.accounts, PROVIDER)
    assert failed is not None
    assert (failed.code, failed.provider) == (ErrorCode.AUTHENTICATION, PROVIDER)
    assert used(account(accounts, "beta")) == 33.0  # the other reading was still taken
