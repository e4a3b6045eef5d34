"""``[accounts]`` → the issuer, a named own login and the refresh policy (used by the
CLI and :mod:`imagebridge.application.codex` only)."""

from __future__ import annotations

from imagebridge.config.model import AccountSettings
from imagebridge.providers.codex.login.issuer import Issuer
from imagebridge.providers.codex.login.refresh import RefreshPolicy
from imagebridge.providers.codex.login.store import OwnLogin

__all__ = ["issuer_from", "own_login", "refresh_policy"]


def issuer_from(accounts: AccountSettings) -> Issuer:
    login = accounts.login
    return Issuer(
        issuer=login.issuer,
        token_url=login.token_url,
        client_id=login.client_id,
        timeout_s=login.http_timeout_ms / 1000,
    )


def own_login(accounts: AccountSettings, name: str) -> OwnLogin:
    return OwnLogin.under(accounts.directory, name)


def refresh_policy(accounts: AccountSettings) -> RefreshPolicy:
    return RefreshPolicy(
        margin_s=float(accounts.refresh_margin_secs),
        lock_timeout_s=accounts.lock_timeout_ms / 1000,
    )
