"""PostgreSQL plumbing shared by the stores: URLs, the connection pool, migrations, errors.

Every store owns one :class:`PostgresDatabase`, which owns one ``psycopg_pool`` pool of
autocommit connections; each call borrows a connection and runs in one transaction, so a
failure or an error raised by the store leaves nothing half-written. Like the SQLite stores, a
call whose caller is cancelled still runs to its end (the caller just stops waiting).

All tables live in one schema (default ``imagebridge``). ``schema_migrations(component,
version, applied_at)`` records each store's steps; migrating takes a transaction-scoped
advisory lock, so any number of bridges may start at once against a fresh database. Steps
are idempotent and self-repairing: missing indexes are re-created on the next open; DDL runs
only when something is missing, so a bridge whose tables were created by an administrator
needs no ``CREATE`` privilege. A schema written by a newer bridge is refused, never changed.

Credentials: the connection URL may hold a password. It is never logged nor put in an error;
use :func:`redact_url` to show a URL.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import IO_ERROR, NO_SPACE, STORAGE_HEALTH, disk_fault
from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS
from imagebridge.storage.postgres.url import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_POOL_MAX_SIZE,
    DEFAULT_POOL_MIN_SIZE,
    DEFAULT_SCHEMA,
    check_schema_name,
    is_postgres_url,
    redact_url,
)
from imagebridge.storage.records import SchemaStatus
from imagebridge.storage.rules.schema import (
    check_migration_numbers,
    check_not_newer,
    is_plain_identifier,
)

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_POOL_MAX_SIZE",
    "DEFAULT_POOL_MIN_SIZE",
    "DEFAULT_SCHEMA",
    "MAX_POOL_SIZE",
    "Connection",
    "PgMigration",
    "PgSchema",
    "PostgresDatabase",
    "advisory_key",
    "check_schema_name",
    "fetch_row",
    "fetch_rows",
    "fetch_value",
    "inspect_postgres_schema",
    "is_postgres_url",
    "missing_objects",
    "quote_schema",
    "redact_url",
    "table_columns",
    "translate_error",
]

T = TypeVar("T")
Connection = psycopg.AsyncConnection[Any]

MAX_POOL_SIZE = 100
MIN_SERVER_VERSION = 120_000
"""PostgreSQL 12: stored generated columns keep the logical size of every job row."""

_MAX_REASON_CHARS = 200
_MIGRATION_LOCK_TIMEOUT_MS = 60_000
_BUSY_STATES = (
    pg_errors.LockNotAvailable,
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    pg_errors.QueryCanceled,
)


# -- URLs ------------------------------------------------------------------------------------


def _check_url(url: object, code: ErrorCode, label: str) -> str:
    if not is_postgres_url(url):
        raise BridgeError(code, f"{label} URL must start with postgresql://")
    assert isinstance(url, str)
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        # The parser's message may quote the URL, password included: never pass it on.
        raise BridgeError(code, f"{label} URL is malformed") from None
    return url


def advisory_key(schema: str, purpose: str) -> int:
    """A stable signed 64-bit advisory-lock key for ``purpose`` within ``schema``."""
    digest = hashlib.sha256(f"imagebridge:{schema}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


# -- errors ----------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    # Only the primary message: a DETAIL line can quote row values (prompts, requests).
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    text = primary or (str(exc).splitlines()[0] if str(exc) else "") or type(exc).__name__
    return text[:_MAX_REASON_CHARS]


_FAULT_BY_SQLSTATE = {
    "53100": NO_SPACE,  # disk_full: the server could not extend a file or write its WAL
    "58030": IO_ERROR,  # io_error: the server's own read or write failed
}


def translate_error(exc: BaseException, code: ErrorCode, label: str) -> BridgeError:
    """A clean :class:`BridgeError` for a psycopg (or other unexpected) failure.

    The server's own disk faults (SQLSTATE ``53100`` disk full, ``58030`` I/O error) are
    storage faults like SQLite's: ``internal``, retryable, ``details.reason`` and
    ``details.storage: "database"``, recorded in the storage health. A database that is
    away (or short of other resources, class ``53``) is retryable with ``details.storage``.
    """
    if isinstance(exc, BridgeError):
        return exc
    sqlstate = getattr(exc, "sqlstate", None)
    fault = _FAULT_BY_SQLSTATE.get(sqlstate) if isinstance(sqlstate, str) else None
    if fault is not None:
        return disk_fault(
            ErrorCode.INTERNAL,
            f"{label} could not be written",
            fault,
            "database",
            retryable=True,
            sqlstate=sqlstate,
        )
    details: dict[str, Any] = {"reason": _reason(exc)}
    if isinstance(sqlstate, str):
        details["sqlstate"] = sqlstate
    if isinstance(exc, _BUSY_STATES):
        return BridgeError(code, f"{label} is busy", retryable=True, details=details)
    if isinstance(
        exc, psycopg_pool.PoolTimeout | psycopg.OperationalError | psycopg.InterfaceError
    ):
        # The database is away (restarting, unreachable): a retry after it returns is safe.
        details["storage"] = "database"
        return BridgeError(code, f"{label} is unavailable", retryable=True, details=details)
    if isinstance(exc, psycopg.IntegrityError):
        return BridgeError(code, f"{label} rejected an inconsistent write", details=details)
    return BridgeError(code, f"{label} operation failed", details=details)


_WROTE_SQL = "SELECT txid_current_if_assigned() IS NOT NULL"
"""Whether this transaction wrote anything (PostgreSQL assigns an xid on the first write)."""


def _connection_lost(exc: BaseException) -> bool:
    """The connection went away (no answer, or a connection or shutdown SQLSTATE)."""
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    sqlstate = getattr(exc, "sqlstate", None)
    return sqlstate is None or sqlstate[:2] in ("08", "57")


# -- queries ---------------------------------------------------------------------------------


async def fetch_rows(conn: Connection, sql: str, params: Any = None) -> list[dict[str, Any]]:
    """Every row of ``sql``, each addressed by column name."""
    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql, params)
        return await cursor.fetchall()


async def fetch_row(conn: Connection, sql: str, params: Any = None) -> dict[str, Any] | None:
    """The first row of ``sql`` addressed by column name, or ``None``."""
    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql, params)
        return await cursor.fetchone()


async def fetch_value(conn: Connection, sql: str, params: Any = None) -> Any:
    """The first column of the first row of ``sql``, or ``None`` when there is no row."""
    cursor = await conn.execute(sql, params)
    row = await cursor.fetchone()
    return None if row is None else row[0]


# -- migrations ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PgMigration:
    """One schema step. ``apply(conn, schema, recorded)`` must be idempotent.

    ``schema`` is the (validated, unquoted) schema name: qualify tables with
    :func:`quote_schema`. ``recorded`` tells whether the step's marker row exists;
    structural checks should run either way.
    """

    version: int
    apply: Callable[[Connection, str, bool], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class PgSchema:
    """A store's migrations, recorded under its ``component`` name."""

    component: str
    migrations: tuple[PgMigration, ...]

    def __post_init__(self) -> None:
        if not is_plain_identifier(self.component):
            raise ValueError("component must be a plain identifier")
        check_migration_numbers([m.version for m in self.migrations])

    @property
    def current_version(self) -> int:
        return len(self.migrations)


def quote_schema(schema: str) -> str:
    """A schema name checked by :func:`check_schema_name`, quoted for SQL text."""
    return f'"{schema}"'


async def _schema_exists(conn: Connection, schema: str) -> bool:
    cursor = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
    return await cursor.fetchone() is not None


async def missing_objects(conn: Connection, schema: str, names: tuple[str, ...]) -> set[str]:
    """Which of the tables or indexes ``names`` do not exist in ``schema``."""
    cursor = await conn.execute(
        "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = ANY(%s)",
        (schema, list(names)),
    )
    found = {str(row[0]) for row in await cursor.fetchall()}
    return set(names) - found


async def table_columns(conn: Connection, schema: str, table: str) -> set[str]:
    cursor = await conn.execute(
        "SELECT a.attname FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped",
        (schema, table),
    )
    return {str(row[0]) for row in await cursor.fetchall()}


async def _recorded_versions(conn: Connection, schema: str, component: str) -> set[int]:
    if "schema_migrations" in await missing_objects(conn, schema, ("schema_migrations",)):
        return set()
    cursor = await conn.execute(
        f"SELECT version FROM {quote_schema(schema)}.schema_migrations "  # noqa: S608
        "WHERE component = %s",
        (component,),
    )
    return {int(row[0]) for row in await cursor.fetchall()}


async def _migrate(
    conn: Connection, schema: str, pg_schema: PgSchema, code: ErrorCode, label: str
) -> None:
    quoted = quote_schema(schema)
    async with conn.transaction():
        await conn.execute(f"SET LOCAL lock_timeout = {_MIGRATION_LOCK_TIMEOUT_MS}")
        # Serializes every bridge migrating this schema, whatever the component.
        await conn.execute(
            "SELECT pg_advisory_xact_lock(%s)", (advisory_key(schema, "migrations"),)
        )
        if not await _schema_exists(conn, schema):
            await conn.execute(f"CREATE SCHEMA {quoted}")
        if await missing_objects(conn, schema, ("schema_migrations",)):
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {quoted}.schema_migrations ("
                'component text COLLATE "C" NOT NULL, '
                "version integer NOT NULL, "
                "applied_at bigint NOT NULL, "
                "PRIMARY KEY (component, version))"
            )
        recorded = await _recorded_versions(conn, schema, pg_schema.component)
        check_not_newer(recorded, pg_schema.current_version, code, label)
        applied_at = int(time.time())
        for migration in pg_schema.migrations:
            await migration.apply(conn, schema, migration.version in recorded)
            if migration.version not in recorded:
                await conn.execute(
                    f"INSERT INTO {quoted}.schema_migrations "  # noqa: S608
                    "(component, version, applied_at) VALUES (%s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (pg_schema.component, migration.version, applied_at),
                )


async def _check_server(conn: Connection, code: ErrorCode, label: str) -> None:
    cursor = await conn.execute(
        "SELECT current_setting('server_encoding'), current_setting('server_version_num')::int"
    )
    row = await cursor.fetchone()
    assert row is not None
    raw = row[0]
    # A SQL_ASCII database hands text back as bytes.
    encoding = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
    version = int(row[1])
    if encoding.upper() not in ("UTF8", "UTF-8"):
        # Byte accounting and stored text rely on UTF-8, as with SQLite.
        raise BridgeError(
            code, f"{label} must use UTF8 encoding", details={"server_encoding": encoding}
        )
    if version < MIN_SERVER_VERSION:
        raise BridgeError(
            code,
            f"{label} needs PostgreSQL 12 or newer",
            details={"server_version_num": version},
        )


# -- connections -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Settings:
    conninfo: str
    kwargs: dict[str, Any]
    lock_timeout_ms: int
    connect_timeout_s: float


def _settings(
    url: str, *, busy_timeout_ms: int, connect_timeout_s: float, code: ErrorCode, label: str
) -> _Settings:
    conninfo = _check_url(url, code, label)
    params = conninfo_to_dict(conninfo)
    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in params:
        kwargs["connect_timeout"] = max(2, math.ceil(connect_timeout_s))
    if "application_name" not in params:
        kwargs["application_name"] = "imagebridge"
    # PostgreSQL reads lock_timeout 0 as "wait forever"; SQLite's busy timeout 0 means "do
    # not wait", which 1 ms is the closest to.
    return _Settings(conninfo, kwargs, max(1, busy_timeout_ms), connect_timeout_s)


async def _connect(settings: _Settings, code: ErrorCode, label: str) -> Connection:
    try:
        async with asyncio.timeout(settings.connect_timeout_s):
            return await psycopg.AsyncConnection.connect(settings.conninfo, **settings.kwargs)
    except TimeoutError:
        raise BridgeError(
            code,
            f"{label} is unavailable",
            retryable=True,
            details={"reason": "connect timeout", "storage": "database"},
        ) from None
    except psycopg.Error as exc:
        raise translate_error(exc, code, label) from None


def _check_options(
    code: ErrorCode,
    busy_timeout_ms: object,
    connect_timeout_s: object,
    pool_min_size: object,
    pool_max_size: object,
) -> None:
    if (
        isinstance(busy_timeout_ms, bool)
        or not isinstance(busy_timeout_ms, int)
        or not 0 <= busy_timeout_ms <= 3_600_000
    ):
        raise BridgeError(code, "busy_timeout_ms must be between 0 and 3600000")
    if (
        isinstance(connect_timeout_s, bool)
        or not isinstance(connect_timeout_s, int | float)
        or not 0.1 <= connect_timeout_s <= 600
    ):
        raise BridgeError(code, "connect_timeout_s must be between 0.1 and 600")
    for name, value, low in (
        ("pool_min_size", pool_min_size, 0),
        ("pool_max_size", pool_max_size, 1),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not low <= value <= MAX_POOL_SIZE
        ):
            raise BridgeError(code, f"{name} must be between {low} and {MAX_POOL_SIZE}")
    assert isinstance(pool_min_size, int)
    assert isinstance(pool_max_size, int)
    if pool_min_size > pool_max_size:
        raise BridgeError(code, "pool_min_size must not exceed pool_max_size")


class PostgresDatabase:
    """A pool of connections to one schema; :meth:`run` is the way in."""

    def __init__(
        self,
        pool: psycopg_pool.AsyncConnectionPool[Any],
        settings: _Settings,
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
    async def open(
        cls,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        pg_schema: PgSchema,
        code: ErrorCode,
        label: str,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        pool_min_size: int = DEFAULT_POOL_MIN_SIZE,
        pool_max_size: int = DEFAULT_POOL_MAX_SIZE,
    ) -> Self:
        """Connect, check the server, migrate ``pg_schema`` and open the pool."""
        _check_options(code, busy_timeout_ms, connect_timeout_s, pool_min_size, pool_max_size)
        check_schema_name(schema, code)
        settings = _settings(
            url,
            busy_timeout_ms=busy_timeout_ms,
            connect_timeout_s=float(connect_timeout_s),
            code=code,
            label=label,
        )
        conn = await _connect(settings, code, label)
        try:
            await _check_server(conn, code, label)
            await _migrate(conn, schema, pg_schema, code, label)
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
            name=f"imagebridge-{pg_schema.component}",
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
        return BridgeError(self._code, f"{self._label} is closed")

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
            if done and _connection_lost(exc):
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
        return await _connect(self._settings, self._code, self._label)

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


# -- read-only inspection --------------------------------------------------------------------


async def inspect_postgres_schema(
    url: str,
    pg_schema: PgSchema,
    *,
    schema: str = DEFAULT_SCHEMA,
    code: ErrorCode,
    label: str,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> SchemaStatus:
    """Report a component's schema version without creating or changing anything."""
    check_schema_name(schema, code)
    _check_options(code, DEFAULT_BUSY_TIMEOUT_MS, connect_timeout_s, 0, 1)
    settings = _settings(
        url,
        busy_timeout_ms=DEFAULT_BUSY_TIMEOUT_MS,
        connect_timeout_s=float(connect_timeout_s),
        code=code,
        label=label,
    )
    current = pg_schema.current_version
    conn = await _connect(settings, code, label)
    try:
        await conn.set_read_only(True)
        async with conn.transaction():
            versions = await _recorded_versions(conn, schema, pg_schema.component)
    except Exception as exc:
        raise translate_error(exc, code, label) from None
    finally:
        await conn.close()
    version = max(versions) if versions else None
    return SchemaStatus(initialized=version is not None, version=version, current_version=current)
