"""The webhook outbox and endpoints in PostgreSQL (tables beside the jobs in their schema).

Same logic and SQL as the SQLite store
(:class:`~imagebridge.storage.webhook_store.WebhookStoreBase`); here are the tables (their
own migrations component, ``webhooks``) and the driver running a conversation in one
transaction on a pooled connection. Claims skip rows another instance is claiming
(``FOR UPDATE SKIP LOCKED``), so instances sharing the database never take the same
delivery. :class:`PostgresOutbox` is what a PostgreSQL job store calls inside the
transaction that records a job's final status.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Self, TypeVar, Unpack

from psycopg.rows import dict_row

from imagebridge.storage.lifecycle import WEBHOOK_STORE, StoreLifecycle
from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.migrations import missing_objects, quote_schema
from imagebridge.storage.postgres.queries import named_placeholders
from imagebridge.storage.postgres.url import (
    ConnectOptions,
)
from imagebridge.storage.rules.schema import Migration, StoreSchema
from imagebridge.storage.rules.webhooks import OutboxLimits
from imagebridge.storage.webhook_outbox import Conversation, WebhookTables, job_outbox
from imagebridge.storage.webhook_store import WebhookStoreBase

__all__ = ["WEBHOOK_SCHEMA", "PostgresOutbox", "PostgresWebhookStore", "converse"]

T = TypeVar("T")

_INDEXES = (
    ("webhook_deliveries_due", "status, next_attempt_at"),
    ("webhook_deliveries_lease", "status, lease_expires_at"),
    ("webhook_deliveries_event", "event_id"),
    ("webhook_deliveries_endpoint", "endpoint_id, status"),
    ("webhook_deliveries_completed", "status, completed_at"),
)


async def _migrate_v1(conn: Connection, schema: str, recorded: bool) -> None:
    quoted = quote_schema(schema)
    missing = await missing_objects(
        conn,
        schema,
        ("webhook_endpoints", "webhook_events", "webhook_deliveries", *(n for n, _ in _INDEXES)),
    )
    if not missing:
        return
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {quoted}.webhook_endpoints ("
        'id text COLLATE "C" PRIMARY KEY, name text NOT NULL, url text NOT NULL, '
        'event_types text NOT NULL, key_id text COLLATE "C", source text NOT NULL, '
        "secret text, secret_env text, secret_hint text, previous_secret text, "
        "previous_expires_at bigint, created_at bigint NOT NULL, updated_at bigint NOT NULL)"
    )
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {quoted}.webhook_events ("
        'id text COLLATE "C" PRIMARY KEY, type text NOT NULL, created_at bigint NOT NULL, '
        'key_id text COLLATE "C", source text COLLATE "C" UNIQUE, payload text NOT NULL)'
    )
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {quoted}.webhook_deliveries ("
        'id text COLLATE "C" PRIMARY KEY, event_id text COLLATE "C" NOT NULL, '
        'event_type text NOT NULL, endpoint_id text COLLATE "C" NOT NULL, '
        'key_id text COLLATE "C", status text NOT NULL, attempts bigint NOT NULL, '
        "created_at bigint NOT NULL, next_attempt_at bigint NOT NULL, "
        "deadline_at bigint NOT NULL, last_attempt_at bigint, completed_at bigint, "
        "last_status bigint, last_error_code text, last_error text, lease_owner text, "
        "lease_expires_at bigint)"
    )
    for name, columns in _INDEXES:
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON {quoted}.webhook_deliveries ({columns})"
        )


WEBHOOK_SCHEMA = StoreSchema(recorded_as="webhooks", migrations=(Migration(1, _migrate_v1),))


async def converse(conn: Connection, conversation: Conversation[T]) -> T:
    """Run ``conversation`` on ``conn`` in the caller's transaction."""
    async with conn.cursor(row_factory=dict_row) as cursor:
        try:
            sql, params = next(conversation)
            while True:
                await cursor.execute(named_placeholders(sql), dict(params))
                rows = await cursor.fetchall() if cursor.description is not None else []
                sql, params = conversation.send(rows)
        except StopIteration as done:
            result: T = done.value
            return result


def tables_in(database: PostgresDatabase) -> WebhookTables:
    return WebhookTables(
        events=database.table("webhook_events"),
        deliveries=database.table("webhook_deliveries"),
        endpoints=database.table("webhook_endpoints"),
        jobs=database.table("image_jobs"),
        responses=database.table("openai_responses"),
    )


class PostgresOutbox:
    """Writes the ``job.*`` events of finished jobs in the job store's own transaction."""

    def __init__(
        self,
        tables: WebhookTables,
        limits: OutboxLimits,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.tables = tables
        self.limits = limits
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)

    async def __call__(self, conn: Connection, job_ids: Sequence[str]) -> None:
        if job_ids:
            await converse(
                conn,
                job_outbox(self.tables, job_ids, limits=self.limits, now_ms=self._clock_ms()),
            )


class PostgresWebhookStore(WebhookStoreBase, StoreLifecycle[PostgresDatabase]):
    """:class:`~imagebridge.storage.interfaces.WebhookStore` in one PostgreSQL schema."""

    _skip_locked = " FOR UPDATE SKIP LOCKED"

    def __init__(self, database: PostgresDatabase) -> None:
        self._db = database
        self._tables = tables_in(database)

    @classmethod
    async def open(
        cls,
        url: str,
        **options: Unpack[ConnectOptions],
    ) -> Self:
        database = await PostgresDatabase.open_store(url, WEBHOOK_STORE, WEBHOOK_SCHEMA, **options)
        return cls(database)

    @property
    def schema(self) -> str:
        return self._db.schema

    def outbox(
        self, limits: OutboxLimits, clock_ms: Callable[[], int] | None = None
    ) -> PostgresOutbox:
        """The hook a PostgreSQL job store in the same schema calls as jobs finish."""
        return PostgresOutbox(self._tables, limits, clock_ms)

    async def _converse(self, conversation: Conversation[T]) -> T:
        async def operation(conn: Connection) -> T:
            return await converse(conn, conversation)

        return await self._db.run(operation)
