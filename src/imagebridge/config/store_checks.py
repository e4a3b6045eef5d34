"""Semantic checks of store locations and of the shared-mode keys of ``[server.jobs]``.

A location is a path (SQLite), ``sqlite:///path`` or a ``postgresql://`` URL. A URL may not
carry a password: the configuration is shown by ``config show`` and written by ``config
set``, so a secret in it would leak. The password comes from the variable named by
``server.jobs.postgres_password_env`` (or libpq's own ``PGPASSWORD`` / ``~/.pgpass``).
The storage layer repeats its own checks when it opens a store; these give ``config check``
one complete list without importing a database driver.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from imagebridge.config._net import is_env_name
from imagebridge.config.model import JobSettings

__all__ = [
    "MAX_LEASE_SECS",
    "Report",
    "check_shared_jobs",
    "check_store_location",
    "is_postgres_location",
]

Report = Callable[[str, str, str], None]
"""Records one issue: (dotted field, stable code, message without the value)."""

MAX_LEASE_SECS = 7 * 24 * 3600
"""The storage layer's longest lease."""
MAX_POOL_SIZE = 100
_POLL_RANGE_MS = (10, 60_000)
_CONNECT_RANGE_MS = (100, 600_000)
_STARTUP_WAIT_MAX_MS = 3_600_000
_URL_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_POSTGRES_SCHEMES = ("postgresql", "postgres")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_INSTANCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")


def is_postgres_location(location: str | Path) -> bool:
    """Whether a configured location is a PostgreSQL URL (shared mode for jobs)."""
    if not isinstance(location, str):
        return False
    match = _URL_PREFIX.match(location)
    return match is not None and match.group(1).lower() in _POSTGRES_SCHEMES


def check_store_location(field: str, location: str | Path, report: Report) -> None:
    """A path, a ``sqlite:///`` URL naming a file, or a password-free PostgreSQL URL."""
    if not isinstance(location, str):
        return  # a path: checked when the store opens it
    match = _URL_PREFIX.match(location)
    if match is None:
        return
    scheme = match.group(1).lower()
    if scheme == "sqlite":
        rest = location[match.end() :]
        if not rest.startswith("/") or "?" in rest or "#" in rest or rest[1:] in ("", ":memory:"):
            report(field, "invalid", "a SQLite URL must be sqlite:///<file path>")
        return
    if scheme not in _POSTGRES_SCHEMES:
        report(field, "unsupported_scheme", "a database URL must be sqlite:/// or postgresql://")
        return
    try:
        parts = urlsplit(location)
        _ = parts.port  # raises on a malformed port
    except ValueError:
        report(field, "invalid", "the PostgreSQL URL is malformed")
        return
    query_keys = {key.lower() for key, _ in parse_qsl(parts.query, keep_blank_values=True)}
    if parts.password is not None or "password" in query_keys:
        report(
            field,
            "credentials_in_url",
            "the URL must not hold a password: name the variable that holds it in "
            "server.jobs.postgres_password_env (or use PGPASSWORD or ~/.pgpass)",
        )
    if parts.fragment:
        report(field, "invalid", "the PostgreSQL URL must not have a fragment")


def check_shared_jobs(jobs: JobSettings, report: Report) -> None:
    """Leases, heartbeats, polling, instance id and the PostgreSQL options."""
    prefix = "server.jobs"
    if jobs.instance_id is not None and _INSTANCE_ID.fullmatch(jobs.instance_id) is None:
        report(
            f"{prefix}.instance_id",
            "invalid",
            "instance id must be 1-128 characters of letters, digits and . _ : @ -, "
            "starting with a letter or digit",
        )
    if not 1 <= jobs.lease_secs <= MAX_LEASE_SECS:
        report(f"{prefix}.lease_secs", "out_of_range", "lease must be between 1 second and a week")
    if jobs.heartbeat_secs == 0:
        report(f"{prefix}.heartbeat_secs", "out_of_range", "heartbeat must be at least 1 second")
    elif jobs.heartbeat_secs * 2 > jobs.lease_secs:
        report(
            f"{prefix}.heartbeat_secs",
            "inconsistent",
            "heartbeat must be at most half of server.jobs.lease_secs, so a lease survives "
            "one late heartbeat",
        )
    low, high = _POLL_RANGE_MS
    if not low <= jobs.poll_interval_ms <= high:
        report(
            f"{prefix}.poll_interval_ms",
            "out_of_range",
            f"poll interval must be between {low} and {high} milliseconds",
        )
    if _SCHEMA_NAME.fullmatch(jobs.postgres_schema) is None or jobs.postgres_schema.startswith(
        "pg_"
    ):
        report(
            f"{prefix}.postgres_schema",
            "invalid",
            "schema names are 1-48 lower-case letters, digits or '_', start with a letter "
            "or '_' and do not start with 'pg_'",
        )
    if jobs.postgres_password_env is not None and not is_env_name(jobs.postgres_password_env):
        report(
            f"{prefix}.postgres_password_env",
            "invalid",
            "must be an environment variable name matching [A-Z][A-Z0-9_]{0,127}",
        )
    if jobs.postgres_pool_min_size > MAX_POOL_SIZE:
        report(
            f"{prefix}.postgres_pool_min_size",
            "out_of_range",
            f"pool sizes must be at most {MAX_POOL_SIZE}",
        )
    if not 1 <= jobs.postgres_pool_max_size <= MAX_POOL_SIZE:
        report(
            f"{prefix}.postgres_pool_max_size",
            "out_of_range",
            f"the largest pool size must be between 1 and {MAX_POOL_SIZE}",
        )
    elif jobs.postgres_pool_min_size > jobs.postgres_pool_max_size:
        report(
            f"{prefix}.postgres_pool_min_size",
            "inconsistent",
            "pool minimum cannot exceed server.jobs.postgres_pool_max_size",
        )
    low, high = _CONNECT_RANGE_MS
    if not low <= jobs.postgres_connect_timeout_ms <= high:
        report(
            f"{prefix}.postgres_connect_timeout_ms",
            "out_of_range",
            f"connect timeout must be between {low} and {high} milliseconds",
        )
    if jobs.postgres_startup_wait_ms > _STARTUP_WAIT_MAX_MS:
        report(
            f"{prefix}.postgres_startup_wait_ms",
            "out_of_range",
            f"startup wait must be at most {_STARTUP_WAIT_MAX_MS} milliseconds (one hour)",
        )
