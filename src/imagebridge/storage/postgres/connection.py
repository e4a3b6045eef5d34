"""Reaching a PostgreSQL database: a checked URL and options, a connection, a fit server.

Every connection is autocommit (each store call opens its own transaction), names itself
``imagebridge`` unless the URL says otherwise, and gives up connecting after
``connect_timeout_s``. The server must use UTF-8 (byte accounting and stored text rely on it,
as with SQLite) and be PostgreSQL 12 or newer. The URL may hold a password: it never reaches
an error or a log.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.location import is_postgres_url
from imagebridge.storage.postgres.errors import database_unavailable, translate_error

__all__ = [
    "MAX_POOL_SIZE",
    "MIN_SERVER_VERSION",
    "Connection",
    "ConnectionSettings",
    "check_options",
    "check_server",
    "connect",
    "connection_settings",
]

Connection = psycopg.AsyncConnection[Any]

MAX_POOL_SIZE = 100
MIN_SERVER_VERSION = 120_000
"""PostgreSQL 12: stored generated columns keep the logical size of every job row."""


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


def check_options(
    code: ErrorCode,
    busy_timeout_ms: object,
    connect_timeout_s: object,
    pool_min_size: object,
    pool_max_size: object,
) -> None:
    """Refuse a lock wait, connect timeout or pool size out of range, before connecting."""
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


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """What every connection of one store is opened with."""

    conninfo: str
    kwargs: dict[str, Any]
    lock_timeout_ms: int
    connect_timeout_s: float


def connection_settings(
    url: str, *, busy_timeout_ms: int, connect_timeout_s: float, code: ErrorCode, label: str
) -> ConnectionSettings:
    """The checked URL and the connection options it does not set itself."""
    conninfo = _check_url(url, code, label)
    params = conninfo_to_dict(conninfo)
    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in params:
        kwargs["connect_timeout"] = max(2, math.ceil(connect_timeout_s))
    if "application_name" not in params:
        kwargs["application_name"] = "imagebridge"
    # PostgreSQL reads lock_timeout 0 as "wait forever"; SQLite's busy timeout 0 means "do
    # not wait", which 1 ms is the closest to.
    return ConnectionSettings(conninfo, kwargs, max(1, busy_timeout_ms), connect_timeout_s)


async def connect(settings: ConnectionSettings, code: ErrorCode, label: str) -> Connection:
    """One connection, given up after ``connect_timeout_s``; failures are retryable."""
    try:
        async with asyncio.timeout(settings.connect_timeout_s):
            return await psycopg.AsyncConnection.connect(settings.conninfo, **settings.kwargs)
    except TimeoutError:
        raise database_unavailable(code, label, {"reason": "connect timeout"}) from None
    except psycopg.Error as exc:
        raise translate_error(exc, code, label) from None


async def check_server(conn: Connection, code: ErrorCode, label: str) -> None:
    """Refuse a server that does not use UTF-8 or is older than PostgreSQL 12."""
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
