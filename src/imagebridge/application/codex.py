"""Configuration → the two Codex HTTP providers (used only by :mod:`imagebridge.application`).

``[providers.codex_responses]`` builds ``codex-responses``; ``[providers.codex_images]``
builds ``codex-images``, which shares the Responses table's transient-retry and quota
settings (its own table has none). Every image bound comes from ``artifacts``; input images
reach the providers loaded by the engine (:mod:`.inputs`).
"""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.application.inputs import image_limits
from imagebridge.config.model import BridgeConfig
from imagebridge.engine.provider import Provider
from imagebridge.providers.codex.auth import CredentialsLoader, load_codex_credentials_async
from imagebridge.providers.codex.images import CodexImagesOptions, CodexImagesProvider
from imagebridge.providers.codex.responses import CodexResponsesOptions, CodexResponsesProvider

__all__ = [
    "CodexBuild",
    "build_codex_images",
    "build_codex_responses",
    "codex_credentials_loader",
]


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
        provider=CodexResponsesProvider(
            options,
            credentials_loader=codex_credentials_loader(config),
        ),
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
        provider=CodexImagesProvider(
            options,
            credentials_loader=codex_credentials_loader(config),
        ),
        max_outputs=table.max_outputs,
        max_parallel_outputs=table.max_parallel_outputs_value,
    )
