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
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from imagebridge.contract.accounts import DEFAULT_ACCOUNT
from imagebridge.providers.codex.pool import AccountPool, Blocker, PoolAccount
from imagebridge.providers.codex_app_server.client import AppServerClient
from imagebridge.providers.codex_app_server.options import AppServerOptions

__all__ = ["BINDING_PREFIX", "AccountClients", "decode_binding", "encode_binding"]

BINDING_PREFIX: Final = "account:"
OWN_LOGIN_BLOCKER: Final = Blocker("own_login_not_for_app_server", None, "configuration")


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
