"""Configuration → the ``codex-app-server`` provider (used only by :mod:`imagebridge.application`).

``[providers.codex_app_server]`` becomes :class:`AppServerOptions` (the field names are
the config keys); persistent sessions live in ``session_database`` (opened on first use,
because opening a store is asynchronous): a SQLite path, or a ``postgresql://`` URL whose
schema, pool and password come from the ``server.jobs.postgres_*`` keys, so that every
bridge instance shares the bindings. Input images are staged under
``<session_database folder>/codex-staging`` (``<data dir>/codex-staging`` for a URL: staging
is always local) after the engine loaded them (:mod:`.inputs`); every image bound comes from
``artifacts.image``. With ``[accounts.pool]`` each account with a codex home runs its own
child (the pool is the one the HTTP transports use).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from imagebridge.application.codex import CodexBuild, codex_pool
from imagebridge.application.inputs import image_limits
from imagebridge.config.model import BridgeConfig, CodexAppServerSettings
from imagebridge.config.paths import default_data_dir
from imagebridge.engine.sessions import SessionBindings
from imagebridge.providers.codex_app_server.capabilities import PROVIDER_NAME
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.provider import (
    AppServerProviderSettings,
    CodexAppServerProvider,
)
from imagebridge.storage import is_postgres_url, open_session_store, postgres_options

__all__ = [
    "STAGING_DIR_NAME",
    "app_server_options",
    "build_codex_app_server_provider",
    "staging_root",
]

STAGING_DIR_NAME = "codex-staging"


def app_server_options(settings: CodexAppServerSettings) -> AppServerOptions:
    """The transport settings of ``[providers.codex_app_server]``."""
    return AppServerOptions(
        executable=settings.executable,
        args=tuple(settings.args),
        cwd=settings.cwd,
        rpc_max_message_bytes=settings.rpc_max_message_bytes,
        rpc_max_notification_bytes=settings.rpc_max_notification_bytes,
        rpc_timeout_ms=settings.rpc_timeout_ms,
        notification_capacity=settings.notification_capacity,
        shutdown_timeout_ms=settings.shutdown_timeout_ms,
        restart_backoff_ms=settings.restart_backoff_ms,
    )


def staging_root(settings: CodexAppServerSettings) -> Path:
    """Where input images are staged: next to the session database, under the data dir."""
    if is_postgres_url(settings.session_database):
        return default_data_dir() / STAGING_DIR_NAME
    return Path(settings.session_database).parent / STAGING_DIR_NAME


def build_codex_app_server_provider(
    config: BridgeConfig, env: Mapping[str, str] | None = None
) -> CodexBuild:
    """Build the provider (configuration errors surface here; nothing is spawned yet).

    The result's ``provider`` is a :class:`CodexAppServerProvider`; native count 1, so
    the application wraps it in the fan-out decorator. ``env`` is where the PostgreSQL
    password variable is read (default: the process environment).
    """
    settings = config.providers.codex_app_server
    limits = image_limits(config)
    database = settings.session_database
    postgres = (
        postgres_options(config.server.jobs, os.environ if env is None else env)
        if is_postgres_url(database)
        else None
    )

    async def open_sessions() -> SessionBindings:
        return await open_session_store(database, provider=PROVIDER_NAME, postgres=postgres)

    provider = CodexAppServerProvider(
        app_server_options(settings),
        open_sessions,
        staging_root=staging_root(settings),
        settings=AppServerProviderSettings(codex_model=settings.codex_model, image_limits=limits),
        pool=codex_pool(config),
    )
    return CodexBuild(
        provider=provider,
        native_count=1,
        max_outputs=settings.max_outputs,
        max_parallel_outputs=settings.max_parallel_outputs_value,
    )
