"""The SQLite jobs table: its current shape and the migrations that bring older files to it.

Version 1 is the table itself (an older file's table is completed column by column), version 2
the searchable lower-cased prompt, version 3 ownership scopes, submission idempotency and the
cached logical size of each row (:data:`LOGICAL_BYTES_SQL`, back-filled here and kept by every
write of :class:`~imagebridge.storage.sqlite.jobs.SqliteJobStore`), version 4 the records of
synchronous requests: each row's ``origin`` (every older row is a ``job``) and the index a
marked retry finds the record it repeats by, version 5 the kept OpenAI responses
(``openai_responses``: a response's ids and shape beside the record holding its work).
"""

from __future__ import annotations

import json
import sqlite3

from imagebridge.contract.errors import BridgeError
from imagebridge.storage.lifecycle import JOB_STORE
from imagebridge.storage.records import LEGACY_SCOPE
from imagebridge.storage.rules.jobs import logical_bytes_sql, prompt_search_text
from imagebridge.storage.rules.schema import Migration, StoreSchema
from imagebridge.storage.rules.values import utf8_size
from imagebridge.storage.sqlite.migrations import ensure_column, table_columns

__all__ = ["JOB_SCHEMA", "LOGICAL_BYTES_SQL"]


# -- accounting ------------------------------------------------------------------------------


def _octets(column: str) -> str:
    return f"COALESCE(length(CAST({column} AS BLOB)), 0)"


LOGICAL_BYTES_SQL = logical_bytes_sql(_octets)
"""A row's logical size in SQLite's dialect, cached in the ``logical_bytes`` column."""

# -- schema ----------------------------------------------------------------------------------

# A fresh database gets the current shape at once, with the small columns first: SQLite reads
# a row's columns in order, so large JSON bodies last keep scans off their overflow pages.
_CREATE_TABLE = """
CREATE TABLE image_jobs (
    id TEXT PRIMARY KEY NOT NULL,
    auth_scope TEXT NOT NULL DEFAULT 'legacy-unowned',
    origin TEXT NOT NULL DEFAULT 'job' CHECK (origin IN ('job', 'sync', 'stream', 'openai')),
    status TEXT NOT NULL CHECK (status IN
        ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    started_at INTEGER,
    completed_at INTEGER,
    progress_stage TEXT,
    partial_images INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    favorite INTEGER NOT NULL DEFAULT 0 CHECK (favorite IN (0, 1)),
    deleted_at INTEGER,
    submission_key_hash TEXT,
    request_fingerprint TEXT,
    logical_bytes INTEGER,
    prompt_search TEXT NOT NULL DEFAULT '',
    request_json TEXT NOT NULL,
    response_json TEXT,
    error_json TEXT
)
"""

_V1_REQUIRED = frozenset({"id", "status", "created_at", "updated_at", "request_json"})
_V1_OPTIONAL = (
    ("started_at", "INTEGER"),
    ("completed_at", "INTEGER"),
    ("progress_stage", "TEXT"),
    ("partial_images", "INTEGER NOT NULL DEFAULT 0"),
    ("response_json", "TEXT"),
    ("error_json", "TEXT"),
    ("cancel_requested", "INTEGER NOT NULL DEFAULT 0"),
    ("favorite", "INTEGER NOT NULL DEFAULT 0"),
    ("deleted_at", "INTEGER"),
)


def _table_exists(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'image_jobs'"
    ).fetchone()
    return row is not None


def _migrate_v1(conn: sqlite3.Connection, recorded: bool) -> None:
    """The jobs table itself (created in its current shape when absent)."""
    if not _table_exists(conn):
        conn.execute(_CREATE_TABLE)
        return
    missing = _V1_REQUIRED - table_columns(conn, "image_jobs")
    if missing:
        raise BridgeError(
            JOB_STORE.code,
            f"{JOB_STORE.label} has an unrecognised image_jobs table",
            details={"missing_columns": sorted(missing)},
        )
    for column, declaration in _V1_OPTIONAL:
        ensure_column(conn, "image_jobs", column, declaration)


def _migrate_v2(conn: sqlite3.Connection, recorded: bool) -> None:
    """Searchable lower-cased prompts and the history index."""
    ensure_column(conn, "image_jobs", "prompt_search", "TEXT NOT NULL DEFAULT ''")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS image_jobs_history_idx ON image_jobs (created_at DESC, id DESC)"
    )
    if not recorded:
        _backfill_prompt_search(conn)


def _backfill_prompt_search(conn: sqlite3.Connection) -> None:
    ids = [
        str(row[0])
        for row in conn.execute(
            "SELECT id FROM image_jobs WHERE prompt_search IS NULL OR prompt_search = ''"
        )
    ]
    for job_id in ids:  # one request body in memory at a time
        row = conn.execute("SELECT request_json FROM image_jobs WHERE id = ?", (job_id,)).fetchone()
        try:
            request = json.loads(row[0])
        except (TypeError, ValueError):
            continue
        prompt = request.get("prompt") if isinstance(request, dict) else None
        if isinstance(prompt, str) and utf8_size(prompt) is not None:
            conn.execute(
                "UPDATE image_jobs SET prompt_search = ? WHERE id = ?",
                (prompt_search_text(prompt), job_id),
            )


def _migrate_v3(conn: sqlite3.Connection, recorded: bool) -> None:
    """Ownership scopes, durable submission idempotency and cached logical sizes."""
    ensure_column(conn, "image_jobs", "auth_scope", f"TEXT NOT NULL DEFAULT '{LEGACY_SCOPE}'")
    ensure_column(conn, "image_jobs", "submission_key_hash", "TEXT")
    ensure_column(conn, "image_jobs", "request_fingerprint", "TEXT")
    ensure_column(conn, "image_jobs", "logical_bytes", "INTEGER")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS image_jobs_scope_history_idx "
        "ON image_jobs (auth_scope, created_at DESC, id DESC)"
    )
    conn.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS image_jobs_submission_idx "
        "ON image_jobs (auth_scope, submission_key_hash) WHERE submission_key_hash IS NOT NULL"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS image_jobs_status_idx ON image_jobs (status, created_at, id)"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS image_jobs_logical_bytes_idx ON image_jobs (logical_bytes)"
    )
    conn.execute(
        f"UPDATE image_jobs SET logical_bytes = {LOGICAL_BYTES_SQL} "  # noqa: S608
        "WHERE logical_bytes IS NULL"
    )


def _migrate_v4(conn: sqlite3.Connection, recorded: bool) -> None:
    """Synchronous requests in the history: ``origin``, and the retry lookup's index."""
    ensure_column(
        conn,
        "image_jobs",
        "origin",
        "TEXT NOT NULL DEFAULT 'job' CHECK (origin IN ('job', 'sync', 'stream', 'openai'))",
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS image_jobs_fingerprint_idx ON image_jobs "
        "(auth_scope, request_fingerprint, created_at DESC) WHERE request_fingerprint IS NOT NULL"
    )


RESPONSES_TABLE = """
CREATE TABLE IF NOT EXISTS openai_responses (
    id TEXT PRIMARY KEY NOT NULL,
    auth_scope TEXT NOT NULL,
    job_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    background INTEGER NOT NULL DEFAULT 0 CHECK (background IN (0, 1)),
    created_at INTEGER NOT NULL,
    deleted_at INTEGER,
    shape_json TEXT NOT NULL
)
"""


def _migrate_v5(conn: sqlite3.Connection, recorded: bool) -> None:
    """Kept OpenAI responses: one row per response, at most one per history record."""
    conn.execute(RESPONSES_TABLE)
    conn.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS openai_responses_job_idx ON openai_responses (job_id)"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS openai_responses_call_idx "
        "ON openai_responses (auth_scope, call_id)"
    )


JOB_SCHEMA = StoreSchema(
    recorded_as="job_schema_migrations",
    migrations=(
        Migration(1, _migrate_v1),
        Migration(2, _migrate_v2),
        Migration(3, _migrate_v3),
        Migration(4, _migrate_v4),
        Migration(5, _migrate_v5),
    ),
)
