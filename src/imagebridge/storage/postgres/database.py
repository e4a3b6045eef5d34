"""The PostgreSQL database handle every store owns: a pool of connections to one schema.

Every store owns one :class:`PostgresDatabase`, which owns one ``psycopg_pool`` pool of
autocommit connections; each call borrows a connection and runs in one transaction, so a
failure or an error raised by the store leaves nothing half-written. Like the SQLite stores, a
call whose caller is cancelled still runs to its end (the caller just stops waiting). Opening
checks the URL, options and server (:mod:`.connection`) and migrates (:mod:`.migrations`);
every failure is translated by :mod:`.errors`.

Credentials: the connection URL may hold a password. It is never logged nor put in an error;
use :func:`~.url.redact_url` to show a URL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Self, TypeVar, Unpack

import psycopg_pool

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import STORAGE_HEALTH
from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS, StoreKind
from imagebridge.storage.postgres.connection import (
    Connection,
    ConnectionSettings,
    check_options,
    check_server,
    connect,
    connection_settings,
)
from imagebridge.storage.postgres.errors import connection_lost, translate_error
from imagebridge.storage.postgres.migrations import Step, migrate, quote_schema
from imagebridge.storage.postgres.queries import fetch_value
from imagebridge.storage.postgres.url import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_POOL_MAX_SIZE,
    DEFAULT_POOL_MIN_SIZE,
    DEFAULT_SCHEMA,
    ConnectOptions,
    check_schema_name,
)
from imagebridge.storage.rules.errors import database_closed
from imagebridge.storage.rules.schema import StoreSchema, is_plain_identifier

__all__ = ["PostgresDatabase"]

T = TypeVar("T")

_WROTE_SQL = "SELECT txid_current_if_assigned() IS NOT NULL"
"""Whether this transaction wrote anything (PostgreSQL assigns an xid on the first write)."""


class PostgresDatabase:
    """A pool of connections to one schema; :meth:`run` is the way in."""

    def __init__(
        self,
        pool: psycopg_pool.AsyncConnectionPool[Any],
        settings: ConnectionSettings,
        schema: str,
        code: ErrorCode,
        label: str,
    ) -> None:
        self._pool = pool
        self._settings = settings
        self._schema = schema
        self._code = code
        self._label = label
        self._closed = False
        self._inflight: set[asyncio.Future[Any]] = set()

    @classmethod
    async def open_store(
        cls,
        url: str,
        kind: StoreKind,
        store_schema: StoreSchema[Step],
        **options: Unpack[ConnectOptions],
    ) -> Self:
        """:meth:`open` for one kind of store: its tables, and its name and code in errors."""
        return await cls.open(
            url, store_schema=store_schema, code=kind.code, label=kind.label, **options
        )

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        store_schema: StoreSchema[Step],
        code: ErrorCode,
        label: str,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        pool_min_size: int = DEFAULT_POOL_MIN_SIZE,
        pool_max_size: int = DEFAULT_POOL_MAX_SIZE,
    ) -> Self:
        """Connect, check the server, migrate ``store_schema`` and open the pool."""
        check_options(code, busy_timeout_ms, connect_timeout_s, pool_min_size, pool_max_size)
        check_schema_name(schema, code)
        settings = connection_settings(
            url,
            busy_timeout_ms=busy_timeout_ms,
            connect_timeout_s=float(connect_timeout_s),
            code=code,
            label=label,
        )
        conn = await connect(settings, code, label)
        try:
            await check_server(conn, code, label)
            await migrate(conn, schema, store_schema, code, label)
        except Exception as exc:
            raise translate_error(exc, code, label) from None
        finally:
            await conn.close()

        lock_timeout = settings.lock_timeout_ms

        async def configure(connection: Connection) -> None:
            await connection.execute(f"SET lock_timeout = {int(lock_timeout)}")

        pool: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
            settings.conninfo,
            kwargs=settings.kwargs,
            min_size=pool_min_size,
            max_size=pool_max_size,
            open=False,
            configure=configure,
            check=psycopg_pool.AsyncConnectionPool.check_connection,
            timeout=settings.connect_timeout_s,
            name=f"imagebridge-{store_schema.recorded_as}",
        )
        try:
            await pool.open(wait=True, timeout=settings.connect_timeout_s)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, Exception):
                raise translate_error(exc, code, label) from None
            raise
        return cls(pool, settings, schema, code, label)

    @property
    def schema(self) -> str:
        return self._schema

    def table(self, name: str) -> str:
        """``name`` qualified with this database's (quoted) schema."""
        if not is_plain_identifier(name):  # pragma: no cover - internal misuse
            raise ValueError("table must be a plain SQL identifier")
        return f"{quote_schema(self._schema)}.{name}"

    @property
    def closed(self) -> bool:
        return self._closed

    def translate(self, exc: BaseException) -> BridgeError:
        return translate_error(exc, self._code, self._label)

    def closed_error(self) -> BridgeError:
        return database_closed(self._code, self._label)

    async def _call(self, operation: Callable[[Connection], Awaitable[T]]) -> T:
        done = False  # the operation ran; what fails after it is the COMMIT
        wrote = False
        try:
            async with self._pool.connection() as conn, conn.transaction():
                result = await operation(conn)
                done = True
                if STORAGE_HEALTH.faulty("database"):  # only then: one more round trip
                    wrote = await fetch_value(conn, _WROTE_SQL) is True
        except BridgeError:
            raise
        except Exception as exc:
            error = self.translate(exc)
            if done and connection_lost(exc):
                # The connection went with the COMMIT in flight: the write may have been
                # applied, so sending the same request again could do it twice.
                error.details["commit"] = "unknown"
            raise error from None
        if wrote:  # a write went through: the database's disk takes them again
            STORAGE_HEALTH.succeeded("database")
        return result

    async def run(self, operation: Callable[[Connection], Awaitable[T]]) -> T:
        """Run ``operation(conn)`` in one transaction on a pooled connection.

        If the awaiting task is cancelled the operation still runs to its end (committed or
        rolled back as a whole); only the waiting stops.
        """
        if self._closed:
            raise self.closed_error()
        task = asyncio.ensure_future(self._call(operation))
        self._inflight.add(task)
        task.add_done_callback(_settle)
        return await asyncio.shield(task)

    async def listener(self) -> Connection:
        """A dedicated autocommit connection (for ``LISTEN``); the caller closes it."""
        if self._closed:
            raise self.closed_error()
        return await connect(self._settings, self._code, self._label)

    async def close(self) -> None:
        """Let calls in flight finish, then close every pooled connection."""
        if self._closed:
            return
        self._closed = True
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)
        await self._pool.close()


def _settle(task: asyncio.Future[Any]) -> None:
    """Consume the outcome of a call whose caller stopped waiting (no 'never retrieved')."""
    if not task.cancelled():
        task.exception()
