"""Semantic checks of ``[accounts]``: the own-login settings and the account pool.

Part of :func:`imagebridge.config.validation.check`: issues are reported, never raised.
"""

from __future__ import annotations

from imagebridge.config._net import UPSTREAM_URL_RULE, valid_upstream_url
from imagebridge.config.model import ACCOUNT_POLICIES, BridgeConfig
from imagebridge.config.store_checks import Report
from imagebridge.contract.accounts import ACCOUNT_NAME_RULE, is_account_name

__all__ = ["check_accounts"]

_MAX_POOL_ACCOUNTS = 64
_MAX_ACCOUNT_WEIGHT = 1000
_MAX_REFUSAL_COOLDOWN_SECS = 7 * 24 * 60 * 60


def check_accounts(config: BridgeConfig, report: Report) -> None:
    """``[accounts]``, ``[accounts.login]`` and the pool."""
    accounts = config.accounts
    if accounts.active is not None and not is_account_name(accounts.active):
        report("accounts.active", "invalid", ACCOUNT_NAME_RULE)
    login = accounts.login
    for key in ("issuer", "token_url"):
        value = getattr(login, key)
        if not valid_upstream_url(value) or "?" in value:
            report(f"accounts.login.{key}", "invalid_url", UPSTREAM_URL_RULE)
    if not login.client_id.strip() or not login.client_id.isascii():
        report("accounts.login.client_id", "required", "the OAuth client id must not be empty")
    if login.http_timeout_ms == 0:
        report("accounts.login.http_timeout_ms", "out_of_range", "must be at least 1 ms")
    if login.device_code_timeout_secs == 0:
        report("accounts.login.device_code_timeout_secs", "out_of_range", "must be at least 1 s")
    _check_pool(config, report)


def _check_pool(config: BridgeConfig, report: Report) -> None:
    """``accounts.policy`` … and each ``[accounts.pool.<name>]`` table."""
    accounts = config.accounts
    if accounts.policy not in ACCOUNT_POLICIES:
        report("accounts.policy", "invalid", "must be one of: " + ", ".join(ACCOUNT_POLICIES))
    if accounts.min_remaining_percent > 100:
        report("accounts.min_remaining_percent", "out_of_range", "must be from 0 to 100")
    if not 1 <= accounts.refusal_cooldown_secs <= _MAX_REFUSAL_COOLDOWN_SECS:
        report(
            "accounts.refusal_cooldown_secs",
            "out_of_range",
            f"must be from 1 to {_MAX_REFUSAL_COOLDOWN_SECS} seconds",
        )
    if not accounts.pool:
        return
    if len(accounts.pool) > _MAX_POOL_ACCOUNTS:
        report("accounts.pool", "out_of_range", f"at most {_MAX_POOL_ACCOUNTS} accounts")
    if not accounts.pool_accounts():
        report("accounts.pool", "required", "at least one pool account must be enabled")
    if accounts.active is not None:
        report(
            "accounts.active",
            "conflict",
            "accounts.active picks the one login when there is no pool; "
            "with [accounts.pool.*] tables, name the login in a pool account instead",
        )
    homes: dict[str, str] = {}
    for name, account in accounts.pool.items():
        if not is_account_name(name):
            report("accounts.pool", "invalid_key", f"account names: {ACCOUNT_NAME_RULE}")
            continue
        prefix = f"accounts.pool.{name}"
        if account.login is not None and account.codex_home is not None:
            report(
                f"{prefix}.codex_home",
                "conflict",
                "an account has one login: set login or codex_home, not both",
            )
        if account.login is not None and not is_account_name(account.login):
            report(f"{prefix}.login", "invalid", ACCOUNT_NAME_RULE)
        if not 1 <= account.weight <= _MAX_ACCOUNT_WEIGHT:
            report(f"{prefix}.weight", "out_of_range", f"must be from 1 to {_MAX_ACCOUNT_WEIGHT}")
        if account.max_concurrent == 0:
            report(
                f"{prefix}.max_concurrent",
                "out_of_range",
                'maximum concurrency must be a positive integer or "unlimited"',
            )
        home = (
            f"home:{account.codex_home}"
            if account.codex_home is not None
            else f"login:{account.login or name}"
        )
        if account.enabled and home in homes:
            report(
                f"{prefix}",
                "duplicate",
                f"uses the same login as account '{homes[home]}' (one login, one account)",
            )
        elif account.enabled:
            homes[home] = name
