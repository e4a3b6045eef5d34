"""Kept OpenAI responses in SQLite (the ``openai_responses`` table of the jobs file).

The SQL is :class:`~imagebridge.storage.response_store.ResponseStoreBase`'s; the table is
the job schema's (version 5), so the store opens the jobs file with that schema.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Self, TypeVar

from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS, JOB_STORE, StoreLifecycle
from imagebridge.storage.response_store import ResponseStoreBase
from imagebridge.storage.sqlite.database import SqliteDatabase
from imagebridge.storage.sqlite.job_schema import JOB_SCHEMA
from imagebridge.storage.sqlite.queries import immediate
from imagebridge.storage.sqlite.webhooks import converse
from imagebridge.storage.webhook_outbox import Conversation

__all__ = ["SqliteResponseStore"]

T = TypeVar("T")


class SqliteResponseStore(ResponseStoreBase, StoreLifecycle[SqliteDatabase]):
    """:class:`~imagebridge.storage.interfaces.ResponseStore` in the jobs' SQLite file."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    ) -> Self:
        database = await SqliteDatabase.open(
            path,
            store_schema=JOB_SCHEMA,
            code=JOB_STORE.code,
            label=JOB_STORE.label,
            busy_timeout_ms=busy_timeout_ms,
        )
        return cls(database)

    async def _converse(self, conversation: Conversation[T]) -> T:
        def operation(conn: sqlite3.Connection) -> T:
            with immediate(conn):
                return converse(conn, conversation)

        return await self._db.run(operation)
