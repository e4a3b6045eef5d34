"""The app-server side of the account pool: one codex child per account, sessions at home.

With ``[accounts.pool]`` every account runs its own ``codex app-server`` child with its own
``CODEX_HOME`` (started on first use), and calls are scheduled over them like the HTTP
transports' calls. A codex thread lives in the home that created it, so a persistent
session is bound to its account: the binding stores ``account:<name>/<thread id>`` and
the session's turns go to that account or fail with a ``session`` error, never to another
one. A binding without the prefix (made before the pool) belongs to the account named
``default``.

Own logins (``imagegen-bridge login``) are not given to codex children: the bridge
refreshes them under its lock, and a codex child would refresh the same single-use
refresh token on its own, without that lock, losing the login. So the app-server uses
the pool's codex-home accounts (``codex_home = "…"``, refreshed by codex) and skips the
own-login ones (docs/accounts.md).

:class:`AccountRouter` runs a call on its account: a persistent session's bound one, an
explicit thread's home (remembered per process, else found by asking each child to
resume it), else the one the pool picks. An isolated call refused at the door (the login,
or the plan's quota before any image) moves to the next account; a session's call never
does.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Final

from imagebridge.contract.accounts import DEFAULT_ACCOUNT
from imagebridge.contract.enums import SessionMode
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.provider import ProviderContext
from imagebridge.engine.served import mark_served
from imagebridge.engine.sessions import SessionBindings
from imagebridge.providers.codex.pool import (
    AccountLease,
    AccountPool,
    Blocker,
    PoolAccount,
    Tried,
    record_failover,
)
from imagebridge.providers.codex_app_server.client import AppServerClient
from imagebridge.providers.codex_app_server.options import AppServerOptions

__all__ = [
    "BINDING_PREFIX",
    "AccountClients",
    "AccountRouter",
    "CallProgress",
    "ThreadHomes",
    "check_home",
    "decode_binding",
    "encode_binding",
]

BINDING_PREFIX: Final = "account:"
OWN_LOGIN_BLOCKER: Final = Blocker("own_login_not_for_app_server", None, "configuration")
MAX_THREAD_HOMES: Final = 4096
"""Thread → account entries remembered (least recently used dropped first)."""


def encode_binding(account: str, thread_id: str) -> str:
    """What a persistent session's binding stores with a pool: the account and the thread."""
    return f"{BINDING_PREFIX}{account}/{thread_id}"


def decode_binding(value: str) -> tuple[str, str]:
    """(account, thread id) of a stored binding; an unprefixed one is the default account's."""
    if value.startswith(BINDING_PREFIX):
        account, separator, thread_id = value[len(BINDING_PREFIX) :].partition("/")
        if separator and account and thread_id:
            return account, thread_id
    return DEFAULT_ACCOUNT, value


class AccountClients:
    """The codex children of the pool's accounts (the implicit account: ``default``)."""

    def __init__(
        self, options: AppServerOptions, pool: AccountPool, default: AppServerClient, name: str
    ) -> None:
        self._options = options
        self.pool = pool
        self._default = default
        self._clients: dict[str, AppServerClient] = {}
        if pool.explicit:
            for account in pool.accounts:
                if account.spec.kind == "own":
                    account.unsupported[name] = OWN_LOGIN_BLOCKER

    def for_account(self, account: PoolAccount) -> AppServerClient:
        """``account``'s child (created, not yet spawned, on first use)."""
        if not self.pool.explicit:
            return self._default
        client = self._clients.get(account.name)
        if client is None:
            options = replace(self._options, codex_home=account.spec.codex_home)
            client = AppServerClient(options)
            self._clients[account.name] = client
        return client

    @property
    def default(self) -> AppServerClient:
        """The child of the first account that a codex child may serve."""
        if not self.pool.explicit:
            return self._default
        served = [a for a in self.pool.accounts if a.spec.kind != "own"] or list(self.pool.accounts)
        return self.for_account(served[0])

    def served(self) -> list[PoolAccount]:
        """The accounts a codex child may serve (codex homes, not own logins)."""
        if not self.pool.explicit:
            return [self.pool.default]
        return [account for account in self.pool.accounts if account.spec.kind != "own"]

    def started(self) -> list[AppServerClient]:
        """Every child object made so far (the implicit one always)."""
        if not self.pool.explicit:
            return [self._default]
        return list(self._clients.values())


def check_home(owner: str, account: str | None) -> None:
    """A persistent session runs on the account it is bound to, never elsewhere."""
    if owner == (account if account is not None else DEFAULT_ACCOUNT):
        return
    raise BridgeError(
        ErrorCode.SESSION,
        f"The session is bound to the account '{owner}', which cannot serve it here.",
        details={"session_account": owner, "reason": "session_bound_elsewhere"},
        suggestions=("Delete the session to start over on another account.",),
    )


@dataclass(slots=True)
class CallProgress:
    """How far one call on one account got (whether it may move to another account)."""

    turn_started: bool = False


RunOn = Callable[[AppServerClient, CallProgress, str], Awaitable[ImageResponse]]
"""Runs the call on one account's child (the account's name last)."""
ResumeOn = Callable[[str, ProviderContext, AppServerClient], Awaitable[None]]
"""Resumes an explicit thread on one child (a ``session`` error: not its home)."""


class ThreadHomes:
    """Thread id → the account whose child created or resumed it (this process, bounded)."""

    def __init__(self, limit: int = MAX_THREAD_HOMES) -> None:
        self._limit = limit
        self._homes: OrderedDict[str, str] = OrderedDict()

    def get(self, thread_id: str) -> str | None:
        return self._homes.get(thread_id)

    def knows(self, thread_id: str, account: str | None) -> bool:
        """Whether ``thread_id`` is known to live on ``account`` (``None``: no pool)."""
        return account is not None and self._homes.get(thread_id) == account

    def note(self, thread_id: str, account: str | None) -> None:
        """Remember the account a thread was created or resumed on (with a pool)."""
        if account is not None:
            self.remember(thread_id, account)

    def remember(self, thread_id: str, account: str) -> None:
        self._homes[thread_id] = account
        self._homes.move_to_end(thread_id)
        while len(self._homes) > self._limit:
            self._homes.popitem(last=False)


class AccountRouter:
    """Which account a call runs on: a session's home, else the pool's pick."""

    def __init__(
        self,
        clients: AccountClients,
        name: str,
        homes: ThreadHomes,
        *,
        sessions: Callable[[], Awaitable[SessionBindings]],
        resume: ResumeOn,
    ) -> None:
        self._clients = clients
        self.pool = clients.pool
        self._name = name
        self._homes = homes
        self._sessions = sessions
        self._resume = resume

    async def execute(
        self, request: ImageRequest, context: ProviderContext, run_on: RunOn
    ) -> ImageResponse:
        """Pick the account (a session's own one), run there; an isolated call refused at
        the door moves to the next account."""
        home = await self._home_of(request, context)
        movable = home is None and request.session.mode is SessionMode.ISOLATED
        tried: list[Tried] = []
        while True:
            lease = await self._lease(context, home, tried)
            began = time.monotonic()
            progress = CallProgress()
            client = self._clients.for_account(lease.account)
            try:
                response = await run_on(client, progress, lease.name)
            except BridgeError as error:
                refusal = lease.failed(error, answered=progress.turn_started, output_seen=False)
                if refusal is not None and movable:
                    elapsed = int((time.monotonic() - began) * 1000)
                    tried.append(Tried(lease.name, error, refusal, elapsed))
                    continue
                error.details["account"] = lease.name
                raise
            except BaseException:
                lease.abandon()
                raise
            else:
                lease.succeeded()
                if tried:
                    record_failover(response, tried, lease.name)
                mark_served(response, lease.name)
                return response
            finally:
                lease.release()

    async def _lease(
        self,
        context: ProviderContext,
        home: str | None,
        tried: list[Tried],
    ) -> AccountLease:
        try:
            return await self.pool.acquire(
                self._name,
                deadline=context.deadline,
                cancellation=context.cancellation,
                tried=tried,
                only=home,
            )
        except BridgeError as error:
            if home is not None and error.code is not ErrorCode.SESSION:
                error.details["session_account"] = home
            raise

    async def _home_of(self, request: ImageRequest, context: ProviderContext) -> str | None:
        """The account a session's call must run on (``None``: any, as the pool picks)."""
        options = request.session
        if options.mode is SessionMode.PERSISTENT and options.key is not None:
            bound = await (await self._sessions()).get(options.key)
            return None if bound is None else decode_binding(bound)[0]
        if options.mode is SessionMode.THREAD and options.thread_id is not None:
            return await self._thread_home(options.thread_id, context)
        return None

    async def _thread_home(self, thread_id: str, context: ProviderContext) -> str:
        """The account whose codex home holds ``thread_id``: known from this process, else
        found by asking each account's child to resume it (only its home can)."""
        known = self._homes.get(thread_id)
        if known is not None:
            return known
        for account in self._clients.served():
            client = self._clients.for_account(account)
            try:
                await self._resume(thread_id, context, client)
            except BridgeError as error:
                if error.code is ErrorCode.SESSION:
                    continue
                raise
            self._homes.remember(thread_id, account.name)
            return account.name
        raise BridgeError(
            ErrorCode.SESSION,
            "No account of the pool has this codex thread.",
            details={"session_mode": "thread"},
            suggestions=["Check the thread id, or use a persistent session instead."],
        )
