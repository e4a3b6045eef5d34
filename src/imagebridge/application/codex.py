"""Configuration → the two Codex HTTP providers (used only by :mod:`imagebridge.application`).

``[providers.codex_responses]`` builds ``codex-responses``; ``[providers.codex_images]``
builds ``codex-images``, which shares the Responses table's transient-retry and quota
settings (its own table has none). Every image bound comes from ``artifacts``; input images
reach the providers loaded by the engine (:mod:`.inputs`).

``[accounts]`` builds the account pool every Codex transport draws from
(:func:`codex_pool`): one per :func:`shared_codex_pool` scope, so that the transports
of one application share it; without ``[accounts.pool]`` it is the one implicit account.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from imagebridge.application.inputs import image_limits
from imagebridge.application.limits import breaker_config
from imagebridge.config.model import PROVIDER_KEYS, BridgeConfig, PoolAccountSettings
from imagebridge.contract.accounts import DEFAULT_ACCOUNT
from imagebridge.engine.provider import Provider
from imagebridge.providers.codex.auth import CredentialsLoader, load_codex_credentials_async
from imagebridge.providers.codex.images import CodexImagesOptions, CodexImagesProvider
from imagebridge.providers.codex.pool import AccountPool, AccountSpec, Policy, PoolSettings
from imagebridge.providers.codex.responses import CodexResponsesOptions, CodexResponsesProvider

__all__ = [
    "CODEX_TRANSPORTS",
    "CodexBuild",
    "build_codex_images",
    "build_codex_responses",
    "codex_credentials_loader",
    "codex_pool",
    "shared_codex_pool",
]

CODEX_TRANSPORTS = tuple(
    PROVIDER_KEYS[key] for key in ("codex_responses", "codex_images", "codex_app_server")
)
"""The transports that draw from the account pool."""

_SHARED: ContextVar[dict[str, AccountPool] | None] = ContextVar("codex_pools", default=None)


@dataclass(frozen=True, slots=True)
class CodexBuild:
    """A built provider plus what the fan-out decorator needs to wrap it."""

    provider: Provider
    max_outputs: int
    max_parallel_outputs: int
    native_count: int = 1


def codex_credentials_loader(config: BridgeConfig) -> CredentialsLoader:
    """``accounts.active`` names an own login: read and refresh it; unset: borrow
    ``$CODEX_HOME`` read-only, as before."""
    accounts = config.accounts
    if accounts.active is None:
        return load_codex_credentials_async
    from imagebridge.application.logins import issuer_from, own_login, refresh_policy
    from imagebridge.providers.codex.login.refresh import OwnLoginCredentials

    return OwnLoginCredentials(
        own_login(accounts, accounts.active), issuer_from(accounts), refresh_policy(accounts)
    )


@contextlib.contextmanager
def shared_codex_pool() -> Iterator[None]:
    """Inside, every :func:`codex_pool` call returns the same pool (one application)."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def codex_pool(config: BridgeConfig) -> AccountPool:
    """The account pool of ``config`` (the scope's, when :func:`shared_codex_pool` is open)."""
    shared = _SHARED.get()
    if shared is not None and "pool" in shared:
        return shared["pool"]
    pool = _build_pool(config)
    if shared is not None:
        shared["pool"] = pool
    return pool


def _build_pool(config: BridgeConfig) -> AccountPool:
    accounts = config.accounts
    configured = accounts.pool_accounts()
    if not configured:
        own = accounts.active is not None
        return AccountPool.single(
            AccountSpec(
                accounts.active or DEFAULT_ACCOUNT,
                codex_credentials_loader(config),
                kind="own" if own else "codex_home",
                codex_home=(accounts.directory / accounts.active) if accounts.active else None,
            )
        )
    runtime = config.runtime
    policy: Policy = "quota"
    for known in ("quota", "round_robin", "primary_first"):
        if accounts.policy == known:
            policy = known
    settings = PoolSettings(
        policy=policy,
        min_remaining_percent=accounts.min_remaining_percent,
        refusal_cooldown_s=float(accounts.refusal_cooldown_secs),
        breakers={
            name: breaker_config(runtime.circuit_breaker_for(name)) for name in CODEX_TRANSPORTS
        },
        breaker=breaker_config(runtime.circuit_breaker),
    )
    return AccountPool(
        [_account_spec(config, name, account) for name, account in configured.items()],
        settings,
    )


def _account_spec(config: BridgeConfig, name: str, account: PoolAccountSettings) -> AccountSpec:
    """One pool account: a codex home read as borrowed, else an own login."""
    if account.codex_home is not None:
        home = Path(account.codex_home).expanduser()
        return AccountSpec(
            name,
            partial(load_codex_credentials_async, home),
            kind="codex_home",
            codex_home=home,
            weight=account.weight,
            max_concurrent=account.max_concurrent_value,
        )
    from imagebridge.application.logins import issuer_from, own_login, refresh_policy
    from imagebridge.providers.codex.login.refresh import OwnLoginCredentials

    login = own_login(config.accounts, account.login or name)
    return AccountSpec(
        name,
        OwnLoginCredentials(login, issuer_from(config.accounts), refresh_policy(config.accounts)),
        kind="own",
        codex_home=login.home,
        weight=account.weight,
        max_concurrent=account.max_concurrent_value,
    )


def build_codex_responses(config: BridgeConfig) -> CodexBuild:
    table = config.providers.codex_responses
    options = CodexResponsesOptions(
        endpoint=table.endpoint,
        usage_endpoint=table.usage_endpoint_value,
        responses_model=table.responses_model,
        responses_model_fallbacks=tuple(table.responses_model_fallbacks),
        image_model=table.image_model,
        max_transient_attempts=table.max_transient_attempts,
        transient_retry_backoff_ms=table.transient_retry_backoff_ms,
        quota_cache_ms=table.quota_cache_ms,
        max_base64_chars=config.artifacts.max_base64_chars,
        image_limits=image_limits(config),
    )
    return CodexBuild(
        provider=CodexResponsesProvider(options, pool=codex_pool(config)),
        max_outputs=table.max_outputs,
        max_parallel_outputs=table.max_parallel_outputs_value,
    )


def build_codex_images(config: BridgeConfig) -> CodexBuild:
    table = config.providers.codex_images
    shared = config.providers.codex_responses
    options = CodexImagesOptions(
        base_url=table.base_url,
        model=table.model,
        max_transient_attempts=shared.max_transient_attempts,
        transient_retry_backoff_ms=shared.transient_retry_backoff_ms,
        quota_cache_ms=shared.quota_cache_ms,
        max_base64_chars=config.artifacts.max_base64_chars,
        max_response_bytes=config.artifacts.max_response_bytes,
        image_limits=image_limits(config),
    )
    return CodexBuild(
        provider=CodexImagesProvider(options, pool=codex_pool(config)),
        max_outputs=table.max_outputs,
        max_parallel_outputs=table.max_parallel_outputs_value,
    )
