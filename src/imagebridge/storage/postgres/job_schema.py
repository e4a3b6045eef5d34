"""The PostgreSQL jobs table: one table for the jobs, their routes and their leases.

Unlike SQLite, where the shared queue keeps routes and leases in side tables, the PostgreSQL
table has the ``provider``, ``lease_owner`` and ``lease_expires_at`` columns from the start, and
its logical size is a stored generated column (:data:`LOGICAL_BYTES_SQL`), so it never goes
stale. Identifier-like text is compared bytewise, as in SQLite. Version 2 adds the records of
synchronous requests: each row's ``origin`` (every older row is a ``job``) and the index a
marked retry finds the record it repeats by; version 3 the kept OpenAI responses
(``openai_responses``: a response's ids and shape beside the record holding its work).
"""

from __future__ import annotations

from imagebridge.contract.errors import BridgeError
from imagebridge.storage.lifecycle import JOB_STORE
from imagebridge.storage.postgres.connection import Connection
from imagebridge.storage.postgres.migrations import missing_objects, quote_schema, table_columns
from imagebridge.storage.records import LEGACY_SCOPE
from imagebridge.storage.rows import JOB_RECORD_COLUMNS
from imagebridge.storage.rules.jobs import logical_bytes_sql
from imagebridge.storage.rules.schema import Migration, StoreSchema

__all__ = ["JOB_SCHEMA", "LOGICAL_BYTES_SQL"]


# -- accounting ------------------------------------------------------------------------------


def _octets(column: str) -> str:
    return f"COALESCE(octet_length({column})::bigint, 0)"


LOGICAL_BYTES_SQL = logical_bytes_sql(_octets)
"""A row's logical size in PostgreSQL's dialect: the generated ``logical_bytes`` column."""


# -- schema ----------------------------------------------------------------------------------

_V1_COLUMNS = (
    *(column for column in JOB_RECORD_COLUMNS if column != "origin"),
    "provider",
    "lease_owner",
    "lease_expires_at",
)
"""Every column a version-1 table must have: what a record read then, and the queue's own."""

# Identifier-like text is compared bytewise (COLLATE "C"), as in SQLite, whatever the
# database's default collation: ids order and page the same on both backends.
_CREATE_TABLE = f"""
CREATE TABLE IF NOT EXISTS {{schema}}.image_jobs (
    id text COLLATE "C" PRIMARY KEY,
    auth_scope text COLLATE "C" NOT NULL DEFAULT '{LEGACY_SCOPE}',
    status text COLLATE "C" NOT NULL CHECK (status IN
        ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    started_at bigint,
    completed_at bigint,
    progress_stage text COLLATE "C",
    partial_images bigint NOT NULL DEFAULT 0,
    cancel_requested boolean NOT NULL DEFAULT false,
    favorite boolean NOT NULL DEFAULT false,
    deleted_at bigint,
    submission_key_hash text COLLATE "C",
    request_fingerprint text COLLATE "C",
    provider text COLLATE "C",
    lease_owner text COLLATE "C",
    lease_expires_at bigint,
    prompt_search text NOT NULL DEFAULT '',
    request_json text NOT NULL,
    response_json text,
    error_json text,
    logical_bytes bigint GENERATED ALWAYS AS {LOGICAL_BYTES_SQL} STORED
)
"""

_INDEXES = {
    "image_jobs_scope_history_idx": "ON {schema}.image_jobs (auth_scope, created_at DESC, id DESC)",
    "image_jobs_submission_idx": "ON {schema}.image_jobs (auth_scope, submission_key_hash) "
    "WHERE submission_key_hash IS NOT NULL",
    "image_jobs_queue_idx": "ON {schema}.image_jobs (created_at, id) WHERE status = 'queued'",
    "image_jobs_lease_idx": "ON {schema}.image_jobs (lease_expires_at) WHERE status = 'running'",
    "image_jobs_logical_bytes_idx": "ON {schema}.image_jobs (logical_bytes)",
}
_UNIQUE_INDEXES = frozenset({"image_jobs_submission_idx"})


async def _migrate_v1(conn: Connection, schema: str, recorded: bool) -> None:
    """The jobs table in its full shape, with its indexes (re-created when missing)."""
    missing = await missing_objects(conn, schema, ("image_jobs", *_INDEXES))
    quoted = quote_schema(schema)
    if "image_jobs" in missing:
        await conn.execute(_CREATE_TABLE.format(schema=quoted))
    else:
        absent = set(_V1_COLUMNS) - await table_columns(conn, schema, "image_jobs")
        if absent:
            raise BridgeError(
                JOB_STORE.code,
                f"{JOB_STORE.label} has an unrecognised image_jobs table",
                details={"missing_columns": sorted(absent)},
            )
    for index, definition in _INDEXES.items():
        if index in missing:
            unique = "UNIQUE " if index in _UNIQUE_INDEXES else ""
            await conn.execute(
                f"CREATE {unique}INDEX IF NOT EXISTS {index} " + definition.format(schema=quoted)
            )


async def _migrate_v2(conn: Connection, schema: str, recorded: bool) -> None:
    """Synchronous requests in the history: ``origin``, and the retry lookup's index.

    Each is made only when missing, so a role without DDL rights opens tables an
    administrator prepared (even a no-op ``ALTER TABLE`` needs the table's owner).
    """
    quoted = quote_schema(schema)
    if "origin" not in await table_columns(conn, schema, "image_jobs"):
        await conn.execute(
            f'ALTER TABLE {quoted}.image_jobs ADD COLUMN origin text COLLATE "C" '
            "NOT NULL DEFAULT 'job' CHECK (origin IN ('job', 'sync', 'stream', 'openai'))"
        )
    if await missing_objects(conn, schema, ("image_jobs_fingerprint_idx",)):
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS image_jobs_fingerprint_idx ON {quoted}.image_jobs "
            "(auth_scope, request_fingerprint, created_at DESC) "
            "WHERE request_fingerprint IS NOT NULL"
        )


_RESPONSES_TABLE = """
CREATE TABLE IF NOT EXISTS {schema}.openai_responses (
    id text COLLATE "C" PRIMARY KEY,
    auth_scope text COLLATE "C" NOT NULL,
    job_id text COLLATE "C" NOT NULL,
    call_id text COLLATE "C" NOT NULL,
    message_id text COLLATE "C" NOT NULL,
    background boolean NOT NULL DEFAULT false,
    created_at bigint NOT NULL,
    deleted_at bigint,
    shape_json text NOT NULL
)
"""
_RESPONSE_INDEXES = {
    "openai_responses_job_idx": "CREATE UNIQUE INDEX IF NOT EXISTS openai_responses_job_idx "
    "ON {schema}.openai_responses (job_id)",
    "openai_responses_call_idx": "CREATE INDEX IF NOT EXISTS openai_responses_call_idx "
    "ON {schema}.openai_responses (auth_scope, call_id)",
}


async def _migrate_v3(conn: Connection, schema: str, recorded: bool) -> None:
    """Kept OpenAI responses: one row per response, at most one per history record (each
    object made only when missing, as in version 2)."""
    quoted = quote_schema(schema)
    missing = await missing_objects(conn, schema, ("openai_responses", *_RESPONSE_INDEXES))
    if "openai_responses" in missing:
        await conn.execute(_RESPONSES_TABLE.format(schema=quoted))
    for name, statement in _RESPONSE_INDEXES.items():
        if name in missing:
            await conn.execute(statement.format(schema=quoted))


JOB_SCHEMA = StoreSchema(
    recorded_as="jobs",
    migrations=(Migration(1, _migrate_v1), Migration(2, _migrate_v2), Migration(3, _migrate_v3)),
)
