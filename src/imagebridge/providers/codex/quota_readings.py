"""Every pool account's quota reading, as one Codex HTTP provider keeps them.

Each account has its own ``wham/usage`` client (:class:`~.quota.CodexQuotaClient`), and each
reading is fed to the account (:meth:`PoolAccount.observe`), where the pool's policy ranks
accounts by it. Readings come from three places: the rate-limit headers of every answer
(:meth:`QuotaReadings.learn`), a reading on demand (diagnostics, ``providers quota
--refresh``), and, with a pool, background readings of the accounts whose reading is older
than the cache (a call never waits for them). Never an account id or a token.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

from imagebridge.contract.errors import BridgeError
from imagebridge.providers.codex.http import CodexHttpClient
from imagebridge.providers.codex.pool import AccountPool, PoolAccount
from imagebridge.providers.codex.quota import CodexQuotaClient
from imagebridge.providers.codex.wire import QuotaSnapshot

__all__ = ["QuotaReadings"]


class QuotaReadings:
    """The quota clients of one provider's accounts, and their background readings."""

    def __init__(self, http: CodexHttpClient, usage_endpoint: str, cache_ms: int) -> None:
        self._http = http
        self._usage_endpoint = usage_endpoint
        self._cache_ms = cache_ms
        self._clients: dict[str, CodexQuotaClient] = {}
        self._background: dict[str, asyncio.Task[None]] = {}

    def client(self, account: PoolAccount) -> CodexQuotaClient:
        """``account``'s ``wham/usage`` client (made on first use)."""
        client = self._clients.get(account.name)
        if client is None:
            client = CodexQuotaClient(
                self._http.get, self._usage_endpoint, self._cache_ms, account.load_credentials
            )
            self._clients[account.name] = client
        return client

    @staticmethod
    def observe(account: PoolAccount, snapshot: QuotaSnapshot | None) -> None:
        """Feed a reading (if any) to ``account``."""
        if snapshot is not None:
            account.observe(snapshot)

    def learn(self, account: PoolAccount, headers: Mapping[str, str]) -> None:
        """What an answer's rate-limit headers say about ``account``'s windows."""
        self.observe(account, self.client(account).update_from_headers(headers))

    async def read(self, account: PoolAccount) -> None:
        """A ``wham/usage`` reading of ``account`` (cached), fed to the pool; never raises."""
        status = await self.client(account).status()
        self.observe(account, status.snapshot)

    async def refresh(self, accounts: Sequence[PoolAccount], provider: str) -> BridgeError | None:
        """New readings now, for every account; the first failure, if any (the other
        readings are still taken)."""
        failed: BridgeError | None = None
        for account in accounts:
            try:
                self.observe(account, await self.client(account).get(force=True))
            except BridgeError as error:
                failed = failed or error.with_provider(provider)
        return failed

    def refresh_stale(self, pool: AccountPool) -> None:
        """With a pool, read the quota of accounts whose reading is old, in the background
        (a call never waits for it; an account not read yet ranks with the best one read)."""
        if not pool.explicit:
            return
        stale_before = time.time() - self._cache_ms / 1000
        for account in pool.accounts:
            snapshot = account.snapshot
            if snapshot is not None and snapshot.observed_at >= stale_before:
                continue
            if account.name in self._background:
                continue
            task = asyncio.ensure_future(self.read(account))
            self._background[account.name] = task
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        for name, running in list(self._background.items()):
            if running is task:
                del self._background[name]

    async def close(self) -> None:
        """Stop the background readings still running."""
        readings = list(self._background.values())
        for task in readings:
            task.cancel()
        if readings:
            await asyncio.gather(*readings, return_exceptions=True)
