"""Where a store lives: a SQLite path or a PostgreSQL URL, told apart without psycopg.

The store factories (:func:`imagebridge.storage.open_job_store` …) read a location with
:func:`resolve_store_location`, so a bridge installed without the ``postgres`` extra still
opens SQLite stores. A URL may carry a password: show it only through
:func:`imagebridge.storage.postgres.url.redact_url`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["is_postgres_url", "resolve_store_location"]

_POSTGRES_SCHEMES = ("postgresql", "postgres")
_URL_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def is_postgres_url(value: object) -> bool:
    """Whether ``value`` is a ``postgresql://`` (or ``postgres://``) connection URL."""
    if not isinstance(value, str):
        return False
    match = _URL_PREFIX.match(value)
    return match is not None and match.group(1).lower() in _POSTGRES_SCHEMES


def resolve_store_location(
    location: str | os.PathLike[str], code: ErrorCode, label: str
) -> str | Path:
    """A PostgreSQL URL (returned as is) or the SQLite file a location names.

    Accepted: a filesystem path; ``sqlite:///relative/path`` or ``sqlite:////absolute/path``
    (SQLAlchemy's spelling: three slashes, then the path); ``postgresql://…`` or
    ``postgres://…``. Any other URL scheme, an empty location, a SQLite URL with a host or a
    query, and SQLite's in-memory database (not durable) are refused with ``code``.
    """
    if isinstance(location, os.PathLike):
        path = os.fspath(location)
        if not isinstance(path, str) or not path:
            raise BridgeError(code, f"{label} location must be a path or a URL")
        return Path(path)
    if not isinstance(location, str) or not location.strip():
        raise BridgeError(code, f"{label} location must be a path or a URL")
    match = _URL_PREFIX.match(location)
    if match is None:
        return Path(location)
    scheme = match.group(1).lower()
    if scheme in _POSTGRES_SCHEMES:
        return location
    if scheme != "sqlite":
        raise BridgeError(
            code,
            f"{label} URL scheme must be sqlite or postgresql",
            details={"scheme": scheme[:32]},
        )
    rest = location[match.end() :]
    if not rest.startswith("/") or "?" in rest or "#" in rest:
        raise BridgeError(
            code, f"{label} SQLite URL must be sqlite:///<path> without a host or query"
        )
    path = rest[1:]
    if not path or path == ":memory:":
        raise BridgeError(code, f"{label} SQLite URL must name a database file")
    return Path(path)
