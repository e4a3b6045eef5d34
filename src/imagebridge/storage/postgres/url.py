"""A PostgreSQL store's URL and options, without psycopg.

The options (:class:`PostgresOptions`: schema, pool, connect timeout, a password kept out of
the URL) are read from ``server.jobs`` by :func:`postgres_options`; psycopg is only imported
when a store connects (:mod:`.connection`), so a bridge without the ``postgres`` extra reads
them too. A URL may carry a password: show it only through :func:`redact_url`. Telling a URL
from a SQLite path is :mod:`imagebridge.storage.location`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypedDict
from urllib.parse import quote, urlsplit, urlunsplit

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_POOL_MAX_SIZE",
    "DEFAULT_POOL_MIN_SIZE",
    "DEFAULT_SCHEMA",
    "ConnectOptions",
    "PostgresOptions",
    "PostgresSection",
    "check_schema_name",
    "postgres_options",
    "redact_url",
    "with_password",
]

DEFAULT_SCHEMA = "imagebridge"
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_POOL_MIN_SIZE = 1
DEFAULT_POOL_MAX_SIZE = 5


class ConnectOptions(TypedDict, total=False):
    """How any PostgreSQL store connects, as keywords of its ``open``; each one left out takes
    its default (``DEFAULT_*`` here, and ``DEFAULT_BUSY_TIMEOUT_MS`` for a lock wait)."""

    schema: str
    busy_timeout_ms: int
    connect_timeout_s: float
    pool_min_size: int
    pool_max_size: int


_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """How to use a PostgreSQL store; ignored when the location is a SQLite path.

    ``schema`` holds every table (one schema may serve jobs, presets and sessions; several
    deployments may share a database under different schemas). The pool keeps between
    ``pool_min_size`` and ``pool_max_size`` connections per store; connecting and waiting
    for a pooled connection each give up after ``connect_timeout_s``.
    """

    schema: str = DEFAULT_SCHEMA
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    pool_min_size: int = DEFAULT_POOL_MIN_SIZE
    pool_max_size: int = DEFAULT_POOL_MAX_SIZE
    password: str | None = field(default=None, repr=False)
    """Added to the URL when connecting (the configured URL never holds it)."""

    def url(self, location: str) -> str:
        """``location`` with :attr:`password` applied, for the store to connect with."""
        return location if self.password is None else with_password(location, self.password)


class PostgresSection(Protocol):
    """The ``server.jobs`` keys that say how to use PostgreSQL (the config model has them)."""

    @property
    def postgres_schema(self) -> str: ...
    @property
    def postgres_password_env(self) -> str | None: ...
    @property
    def postgres_pool_min_size(self) -> int: ...
    @property
    def postgres_pool_max_size(self) -> int: ...
    @property
    def postgres_connect_timeout_ms(self) -> int: ...


def postgres_options(section: PostgresSection, env: Mapping[str, str]) -> PostgresOptions:
    """The options of ``server.jobs``; the password is read from the variable it names.

    A named variable that is missing or empty is a ``configuration`` error, as for the
    bearer token: a bridge that would fail every query later refuses to start instead.
    """
    password: str | None = None
    if section.postgres_password_env is not None:
        password = env.get(section.postgres_password_env) or None
        if password is None:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "the variable named by server.jobs.postgres_password_env is missing or empty",
                details={"field": "server.jobs.postgres_password_env"},
            )
    return PostgresOptions(
        schema=section.postgres_schema,
        connect_timeout_s=section.postgres_connect_timeout_ms / 1000,
        pool_min_size=section.postgres_pool_min_size,
        pool_max_size=section.postgres_pool_max_size,
        password=password,
    )


def with_password(url: str, password: str) -> str:
    """``url`` with ``password`` as its ``password`` query parameter (percent-encoded).

    libpq reads any connection parameter from the query, and a query parameter needs no
    user name in the URL (``user:password@`` would). Show the result only through
    :func:`redact_url`.
    """
    parts = urlsplit(url)
    pair = "password=" + quote(password, safe="")
    query = f"{parts.query}&{pair}" if parts.query else pair
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def redact_url(url: str) -> str:
    """``url`` with any password (in the user part or a ``password=`` query) as ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://***"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        user, sep, _ = userinfo.partition(":")
        netloc = f"{user}{':***' if sep else ''}@{hosts}"
    query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def check_schema_name(schema: object, code: ErrorCode = ErrorCode.CONFIGURATION) -> str:
    """A plain lower-case identifier of at most 48 characters, not starting with ``pg_``."""
    if (
        not isinstance(schema, str)
        or _SCHEMA_NAME.fullmatch(schema) is None
        or schema.startswith("pg_")
    ):
        raise BridgeError(
            code,
            "PostgreSQL schema names are 1-48 lower-case letters, digits or '_', start with a "
            "letter or '_' and do not start with 'pg_'",
            details={"field": "schema"},
        )
    return schema
