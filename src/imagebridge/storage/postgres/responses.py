"""Kept OpenAI responses in PostgreSQL (the ``openai_responses`` table of the jobs schema).

The SQL is :class:`~imagebridge.storage.response_store.ResponseStoreBase`'s; the table is
the job schema's (version 3), so the store opens the schema with that component. Every
instance on the database reads the same rows.
"""

from __future__ import annotations

from typing import Self, TypeVar, Unpack

from imagebridge.storage.lifecycle import JOB_STORE, StoreLifecycle
from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.database import PostgresDatabase
from imagebridge.storage.postgres.job_schema import JOB_SCHEMA
from imagebridge.storage.postgres.url import (
    ConnectOptions,
)
from imagebridge.storage.postgres.webhooks import converse
from imagebridge.storage.response_store import ResponseStoreBase
from imagebridge.storage.webhook_outbox import Conversation

__all__ = ["PostgresResponseStore"]

T = TypeVar("T")


class PostgresResponseStore(ResponseStoreBase, StoreLifecycle[PostgresDatabase]):
    """:class:`~imagebridge.storage.interfaces.ResponseStore` in one PostgreSQL schema."""

    def __init__(self, database: PostgresDatabase) -> None:
        self._db = database
        self._table = database.table("openai_responses")

    @classmethod
    async def open(
        cls,
        url: str,
        **options: Unpack[ConnectOptions],
    ) -> Self:
        database = await PostgresDatabase.open_store(url, JOB_STORE, JOB_SCHEMA, **options)
        return cls(database)

    async def _converse(self, conversation: Conversation[T]) -> T:
        async def operation(conn: Connection) -> T:
            return await converse(conn, conversation)

        return await self._db.run(operation)
