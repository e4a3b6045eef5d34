"""Durable storage: jobs, presets and session bindings.

The interfaces (``JobStore``, ``PresetStore``, ``SessionStore``, ``SharedJobStore``) live in
:mod:`imagebridge.storage.interfaces`, their plain records in :mod:`imagebridge.storage.records`;
SQLite (:mod:`imagebridge.storage.sqlite`) and PostgreSQL (:mod:`imagebridge.storage.postgres`)
implement them, with every backend-neutral check and rule in :mod:`imagebridge.storage.rules`.
Stores take and return JSON-ready data, so they never depend on the contract models. The twins
are named alike, ``Sqlite…`` and ``Postgres…``: ``…JobStore`` is the plain job store,
``…SharedJobStore`` the same plus the shared queue (what :func:`open_job_store` opens), then
``…PresetStore``, ``…SessionStore``, ``…KeyStore`` and ``…WebhookStore`` (the webhook outbox,
:mod:`imagebridge.storage.webhook_store`; :func:`attach_outbox` makes a job store write its
jobs' events into it in the transaction of each final status).

Open stores with the factories (``open_job_store`` …): the location picks the backend
(:mod:`imagebridge.storage.location`), a path or ``sqlite:///path`` for SQLite,
``postgresql://…`` for PostgreSQL. The PostgreSQL classes
are imported on first use, so SQLite works without the ``postgres`` extra (psycopg).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from imagebridge.contract.errors import BridgeError
from imagebridge.storage.cursors import (
    decode_job_cursor,
    decode_preset_cursor,
    encode_job_cursor,
    encode_preset_cursor,
)
from imagebridge.storage.interfaces import (
    JobStore,
    KeyStore,
    PresetStore,
    ResponseStore,
    SessionStore,
    SharedJobStore,
    WebhookStore,
)
from imagebridge.storage.lifecycle import (
    DEFAULT_BUSY_TIMEOUT_MS,
    JOB_STORE,
    KEY_STORE,
    PRESET_STORE,
    SESSION_STORE,
    WEBHOOK_STORE,
)
from imagebridge.storage.location import is_postgres_url, resolve_store_location
from imagebridge.storage.postgres.url import (
    ConnectOptions,
    PostgresOptions,
    PostgresSection,
    postgres_options,
    redact_url,
)
from imagebridge.storage.records import (
    LEGACY_SCOPE,
    CreateResult,
    JobEvent,
    JobEventKind,
    JobIdentity,
    JobOrigin,
    JobPage,
    JobRecord,
    JobStatistics,
    JobSummary,
    JobVisibility,
    LeaseRenewal,
    PresetPage,
    PresetRecord,
    ResponseRecord,
    SchemaStatus,
)
from imagebridge.storage.rules.jobs import (
    ACTIVE_ROW_RESERVE_BYTES,
    MAX_ERROR_JSON_BYTES,
    MAX_RESULT_JSON_BYTES,
    ROW_OVERHEAD_BYTES,
)
from imagebridge.storage.rules.presets import MAX_PRESET_TEMPLATE_BYTES
from imagebridge.storage.rules.queue import UNROUTED
from imagebridge.storage.rules.webhooks import OutboxLimits
from imagebridge.storage.sqlite import jobs as sqlite_jobs
from imagebridge.storage.sqlite import presets as sqlite_presets
from imagebridge.storage.sqlite import sessions as sqlite_sessions
from imagebridge.storage.sqlite.jobs import SqliteJobStore
from imagebridge.storage.sqlite.keys import SqliteKeyStore
from imagebridge.storage.sqlite.presets import SqlitePresetStore
from imagebridge.storage.sqlite.sessions import SqliteSessionStore
from imagebridge.storage.sqlite.shared_queue import SqliteSharedJobStore
from imagebridge.storage.sqlite.webhooks import SqliteWebhookStore

if TYPE_CHECKING:
    from imagebridge.storage.postgres.jobs import PostgresJobStore
    from imagebridge.storage.postgres.keys import PostgresKeyStore
    from imagebridge.storage.postgres.presets import PostgresPresetStore
    from imagebridge.storage.postgres.sessions import PostgresSessionStore
    from imagebridge.storage.postgres.shared_queue import PostgresSharedJobStore
    from imagebridge.storage.postgres.webhooks import PostgresWebhookStore

__all__ = [
    "ACTIVE_ROW_RESERVE_BYTES",
    "LEGACY_SCOPE",
    "MAX_ERROR_JSON_BYTES",
    "MAX_RESULT_JSON_BYTES",
    "ROW_OVERHEAD_BYTES",
    "UNROUTED",
    "CreateResult",
    "JobEvent",
    "JobEventKind",
    "JobIdentity",
    "JobOrigin",
    "JobPage",
    "JobRecord",
    "JobStatistics",
    "JobStore",
    "JobSummary",
    "JobVisibility",
    "KeyStore",
    "LeaseRenewal",
    "PostgresJobStore",
    "PostgresKeyStore",
    "PostgresOptions",
    "PostgresPresetStore",
    "PostgresSection",
    "PostgresSessionStore",
    "PostgresSharedJobStore",
    "PostgresWebhookStore",
    "PresetPage",
    "PresetRecord",
    "PresetStore",
    "ResponseRecord",
    "ResponseStore",
    "SchemaStatus",
    "SessionStore",
    "SharedJobStore",
    "SqliteJobStore",
    "SqliteKeyStore",
    "SqlitePresetStore",
    "SqliteSessionStore",
    "SqliteSharedJobStore",
    "SqliteWebhookStore",
    "WebhookStore",
    "attach_outbox",
    "decode_job_cursor",
    "decode_preset_cursor",
    "encode_job_cursor",
    "encode_preset_cursor",
    "inspect_store_schema",
    "is_postgres_url",
    "open_job_store",
    "open_key_store",
    "open_preset_store",
    "open_response_store",
    "open_session_store",
    "open_webhook_store",
    "postgres_options",
    "redact_url",
    "resolve_store_location",
]

_LAZY = {
    "PostgresJobStore": "imagebridge.storage.postgres.jobs",
    "PostgresSharedJobStore": "imagebridge.storage.postgres.shared_queue",
    "PostgresKeyStore": "imagebridge.storage.postgres.keys",
    "PostgresPresetStore": "imagebridge.storage.postgres.presets",
    "PostgresSessionStore": "imagebridge.storage.postgres.sessions",
    "PostgresWebhookStore": "imagebridge.storage.postgres.webhooks",
}


def __getattr__(name: str) -> Any:
    """The PostgreSQL classes, imported (with psycopg) only when first asked for."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


# -- factories: the location picks the backend ---------------------------------------------

_KINDS = {"jobs": JOB_STORE, "presets": PRESET_STORE, "sessions": SESSION_STORE}


def _postgres_args(
    target: str, postgres: PostgresOptions | None, busy_timeout_ms: int
) -> tuple[str, ConnectOptions]:
    """The URL to connect with (password applied) and the pool settings, from ``postgres``."""
    options = postgres or PostgresOptions()
    return options.url(target), ConnectOptions(
        schema=options.schema,
        busy_timeout_ms=busy_timeout_ms,
        connect_timeout_s=options.connect_timeout_s,
        pool_min_size=options.pool_min_size,
        pool_max_size=options.pool_max_size,
    )


async def open_job_store(
    location: str | os.PathLike[str],
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    max_result_bytes: int = MAX_RESULT_JSON_BYTES,
    max_error_bytes: int = MAX_ERROR_JSON_BYTES,
    postgres: PostgresOptions | None = None,
) -> SharedJobStore:
    """Open the job store at ``location``: a SQLite path / ``sqlite:///`` URL, or a
    ``postgresql://`` URL. Either way the store is a :class:`SharedJobStore`."""
    target = resolve_store_location(location, JOB_STORE.code, JOB_STORE.label)
    if isinstance(target, Path):
        return await SqliteSharedJobStore.open(
            target,
            busy_timeout_ms=busy_timeout_ms,
            max_result_bytes=max_result_bytes,
            max_error_bytes=max_error_bytes,
        )
    from imagebridge.storage.postgres.shared_queue import PostgresSharedJobStore

    url, args = _postgres_args(target, postgres, busy_timeout_ms)
    return await PostgresSharedJobStore.open(
        url, **args, max_result_bytes=max_result_bytes, max_error_bytes=max_error_bytes
    )


async def open_preset_store(
    location: str | os.PathLike[str],
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    max_template_bytes: int = MAX_PRESET_TEMPLATE_BYTES,
    postgres: PostgresOptions | None = None,
) -> PresetStore:
    """Open the preset store at ``location`` (SQLite path or URL, or PostgreSQL URL)."""
    target = resolve_store_location(location, PRESET_STORE.code, PRESET_STORE.label)
    if isinstance(target, Path):
        return await SqlitePresetStore.open(
            target, busy_timeout_ms=busy_timeout_ms, max_template_bytes=max_template_bytes
        )
    from imagebridge.storage.postgres.presets import PostgresPresetStore

    url, args = _postgres_args(target, postgres, busy_timeout_ms)
    return await PostgresPresetStore.open(url, **args, max_template_bytes=max_template_bytes)


async def open_session_store(
    location: str | os.PathLike[str],
    *,
    provider: str,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    postgres: PostgresOptions | None = None,
) -> SessionStore:
    """Open ``provider``'s session bindings at ``location``; every failure is ``session``."""
    target = resolve_store_location(location, SESSION_STORE.code, SESSION_STORE.label)
    if isinstance(target, Path):
        return await SqliteSessionStore.open(
            target, provider=provider, busy_timeout_ms=busy_timeout_ms
        )
    from imagebridge.storage.postgres.sessions import PostgresSessionStore

    url, args = _postgres_args(target, postgres, busy_timeout_ms)
    return await PostgresSessionStore.open(url, provider=provider, **args)


async def open_key_store(
    location: str | os.PathLike[str],
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    postgres: PostgresOptions | None = None,
) -> KeyStore:
    """Open the API-key store at ``location`` (the jobs database: SQLite or PostgreSQL)."""
    target = resolve_store_location(location, KEY_STORE.code, KEY_STORE.label)
    if isinstance(target, Path):
        return await SqliteKeyStore.open(target, busy_timeout_ms=busy_timeout_ms)
    from imagebridge.storage.postgres.keys import PostgresKeyStore

    url, args = _postgres_args(target, postgres, busy_timeout_ms)
    return await PostgresKeyStore.open(url, **args)


async def open_webhook_store(
    location: str | os.PathLike[str],
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    postgres: PostgresOptions | None = None,
) -> WebhookStore:
    """Open the webhook outbox and endpoints at ``location`` (the jobs database)."""
    target = resolve_store_location(location, WEBHOOK_STORE.code, WEBHOOK_STORE.label)
    if isinstance(target, Path):
        return await SqliteWebhookStore.open(target, busy_timeout_ms=busy_timeout_ms)
    from imagebridge.storage.postgres.webhooks import PostgresWebhookStore

    url, args = _postgres_args(target, postgres, busy_timeout_ms)
    return await PostgresWebhookStore.open(url, **args)


async def open_response_store(
    location: str | os.PathLike[str],
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    postgres: PostgresOptions | None = None,
) -> ResponseStore:
    """Open the kept OpenAI responses at ``location`` (the jobs database)."""
    target = resolve_store_location(location, JOB_STORE.code, JOB_STORE.label)
    if isinstance(target, Path):
        from imagebridge.storage.sqlite.responses import SqliteResponseStore

        return await SqliteResponseStore.open(target, busy_timeout_ms=busy_timeout_ms)
    from imagebridge.storage.postgres.responses import PostgresResponseStore

    url, args = _postgres_args(target, postgres, busy_timeout_ms)
    return await PostgresResponseStore.open(url, **args)


def attach_outbox(job_store: JobStore, webhooks: WebhookStore, limits: OutboxLimits) -> None:
    """Make ``job_store`` write the ``job.*`` events of the jobs it finishes into the
    outbox of ``webhooks``, in the transaction recording each final status. Both must be
    the same database (one SQLite file, or one PostgreSQL schema)."""
    if isinstance(job_store, SqliteJobStore) and isinstance(webhooks, SqliteWebhookStore):
        if job_store.path.resolve() != webhooks.path.resolve():
            raise BridgeError(JOB_STORE.code, "the webhook outbox must be in the jobs database")
        job_store.on_finished(webhooks.outbox(limits))
        return
    mismatch = BridgeError(JOB_STORE.code, "the webhook outbox must be in the jobs database")
    if isinstance(job_store, SqliteJobStore) or isinstance(webhooks, SqliteWebhookStore):
        raise mismatch
    from imagebridge.storage.postgres.jobs import PostgresJobStore
    from imagebridge.storage.postgres.webhooks import PostgresWebhookStore

    if isinstance(job_store, PostgresJobStore) and isinstance(webhooks, PostgresWebhookStore):
        if job_store.schema != webhooks.schema:
            raise mismatch
        job_store.on_finished(webhooks.outbox(limits))
        return
    raise mismatch


async def inspect_store_schema(
    location: str | os.PathLike[str],
    store: Literal["jobs", "presets", "sessions"],
    *,
    postgres: PostgresOptions | None = None,
) -> SchemaStatus:
    """Read-only: the schema version of one store at ``location`` (nothing is created)."""
    kind = _KINDS[store]
    target = resolve_store_location(location, kind.code, kind.label)
    if isinstance(target, Path):
        inspect = {
            "jobs": sqlite_jobs.inspect_job_schema,
            "presets": sqlite_presets.inspect_preset_schema,
            "sessions": sqlite_sessions.inspect_session_schema,
        }[store]
        return await inspect(target)
    options = postgres or PostgresOptions()
    if store == "jobs":
        from imagebridge.storage.postgres.jobs import inspect_job_schema as pg_inspect
    elif store == "presets":
        from imagebridge.storage.postgres.presets import inspect_preset_schema as pg_inspect
    else:
        from imagebridge.storage.postgres.sessions import inspect_session_schema as pg_inspect
    return await pg_inspect(
        options.url(target), schema=options.schema, connect_timeout_s=options.connect_timeout_s
    )
