"""The webhook outbox and endpoints in SQLite (tables beside the jobs in their file).

The logic and SQL are :class:`~imagebridge.storage.webhook_store.WebhookStoreBase`'s; here
are the tables (their own migrations, ``webhook_schema_migrations``, so the job schema is
untouched) and the driver running a conversation in one ``BEGIN IMMEDIATE`` transaction on
the store's worker thread. :class:`SqliteOutbox` is what a SQLite job store calls inside
the transaction that records a job's final status.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar

from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS, WEBHOOK_STORE, StoreLifecycle
from imagebridge.storage.rules.schema import Migration, StoreSchema
from imagebridge.storage.rules.webhooks import OutboxLimits, Statement
from imagebridge.storage.sqlite.database import SqliteDatabase
from imagebridge.storage.sqlite.queries import immediate
from imagebridge.storage.webhook_outbox import Conversation, WebhookTables, job_outbox
from imagebridge.storage.webhook_store import WebhookStoreBase

__all__ = ["WEBHOOK_SCHEMA", "SqliteOutbox", "SqliteWebhookStore", "converse"]

T = TypeVar("T")


def _migrate_v1(conn: sqlite3.Connection, recorded: bool) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS webhook_endpoints ("
        "id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, url TEXT NOT NULL, "
        "event_types TEXT NOT NULL, key_id TEXT, source TEXT NOT NULL, secret TEXT, "
        "secret_env TEXT, secret_hint TEXT, previous_secret TEXT, "
        "previous_expires_at INTEGER, created_at INTEGER NOT NULL, "
        "updated_at INTEGER NOT NULL)"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS webhook_events ("
        "id TEXT PRIMARY KEY NOT NULL, type TEXT NOT NULL, created_at INTEGER NOT NULL, "
        "key_id TEXT, source TEXT UNIQUE, payload TEXT NOT NULL)"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS webhook_deliveries ("
        "id TEXT PRIMARY KEY NOT NULL, event_id TEXT NOT NULL, event_type TEXT NOT NULL, "
        "endpoint_id TEXT NOT NULL, key_id TEXT, status TEXT NOT NULL, "
        "attempts INTEGER NOT NULL, created_at INTEGER NOT NULL, "
        "next_attempt_at INTEGER NOT NULL, deadline_at INTEGER NOT NULL, "
        "last_attempt_at INTEGER, completed_at INTEGER, last_status INTEGER, "
        "last_error_code TEXT, last_error TEXT, lease_owner TEXT, lease_expires_at INTEGER)"
    )
    for name, columns in _INDEXES:
        conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON webhook_deliveries ({columns})")


_INDEXES = (
    ("webhook_deliveries_due", "status, next_attempt_at"),
    ("webhook_deliveries_lease", "status, lease_expires_at"),
    ("webhook_deliveries_event", "event_id"),
    ("webhook_deliveries_endpoint", "endpoint_id, status"),
    ("webhook_deliveries_completed", "status, completed_at"),
)

WEBHOOK_SCHEMA = StoreSchema(
    recorded_as="webhook_schema_migrations", migrations=(Migration(1, _migrate_v1),)
)


def _rows(conn: sqlite3.Connection, statement: Statement) -> list[dict[str, Any]]:
    sql, params = statement
    cursor = conn.execute(sql, dict(params))
    rows = cursor.fetchall()
    if cursor.description is None:
        return []
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in rows]


def converse(conn: sqlite3.Connection, conversation: Conversation[T]) -> T:
    """Run ``conversation`` on ``conn`` in the caller's transaction."""
    try:
        statement = next(conversation)
        while True:
            statement = conversation.send(_rows(conn, statement))
    except StopIteration as done:
        result: T = done.value
        return result


class SqliteOutbox:
    """Writes the ``job.*`` events of finished jobs in the job store's own transaction."""

    def __init__(self, limits: OutboxLimits, clock_ms: Callable[[], int] | None = None) -> None:
        self.limits = limits
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)

    def __call__(self, conn: sqlite3.Connection, job_ids: Sequence[str]) -> None:
        if job_ids:
            converse(
                conn,
                job_outbox(WebhookTables(), job_ids, limits=self.limits, now_ms=self._clock_ms()),
            )


class SqliteWebhookStore(WebhookStoreBase, StoreLifecycle[SqliteDatabase]):
    """:class:`~imagebridge.storage.interfaces.WebhookStore` in one SQLite file."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    ) -> Self:
        database = await SqliteDatabase.open(
            path,
            store_schema=WEBHOOK_SCHEMA,
            code=WEBHOOK_STORE.code,
            label=WEBHOOK_STORE.label,
            busy_timeout_ms=busy_timeout_ms,
        )
        return cls(database)

    @property
    def path(self) -> Path:
        return self._db.path

    def outbox(
        self, limits: OutboxLimits, clock_ms: Callable[[], int] | None = None
    ) -> SqliteOutbox:
        """The hook a SQLite job store on the same file calls as jobs finish."""
        return SqliteOutbox(limits, clock_ms)

    async def _converse(self, conversation: Conversation[T]) -> T:
        def operation(conn: sqlite3.Connection) -> T:
            with immediate(conn):
                return converse(conn, conversation)

        return await self._db.run(operation)

    async def _run(self, statement: Statement) -> list[dict[str, Any]]:
        if not statement[0].startswith("SELECT "):
            return await super()._run(statement)

        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            return _rows(conn, statement)  # one statement is atomic alone; reads take no lock

        return await self._db.run(read)
