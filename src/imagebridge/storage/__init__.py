"""Durable storage: jobs, presets and session bindings.

The interfaces (``JobStore``, ``PresetStore``, ``SessionStore``) and their plain records live
in :mod:`imagebridge.storage.base`; SQLite implements them here. Stores take and return
JSON-ready data, so they never depend on the contract models.
"""

from imagebridge.storage.base import (
    ACTIVE_ROW_RESERVE_BYTES,
    LEGACY_SCOPE,
    MAX_ERROR_JSON_BYTES,
    MAX_RESULT_JSON_BYTES,
    ROW_OVERHEAD_BYTES,
    CreateResult,
    JobIdentity,
    JobPage,
    JobRecord,
    JobStatistics,
    JobStore,
    JobSummary,
    JobVisibility,
    PresetPage,
    PresetRecord,
    PresetStore,
    SchemaStatus,
    SessionStore,
)
from imagebridge.storage.cursors import (
    decode_job_cursor,
    decode_preset_cursor,
    encode_job_cursor,
    encode_preset_cursor,
)
from imagebridge.storage.jobs import SqliteJobStore, inspect_job_schema
from imagebridge.storage.presets import SqlitePresetStore, inspect_preset_schema
from imagebridge.storage.sessions import SqliteSessionStore, inspect_session_schema

__all__ = [
    "ACTIVE_ROW_RESERVE_BYTES",
    "LEGACY_SCOPE",
    "MAX_ERROR_JSON_BYTES",
    "MAX_RESULT_JSON_BYTES",
    "ROW_OVERHEAD_BYTES",
    "CreateResult",
    "JobIdentity",
    "JobPage",
    "JobRecord",
    "JobStatistics",
    "JobStore",
    "JobSummary",
    "JobVisibility",
    "PresetPage",
    "PresetRecord",
    "PresetStore",
    "SchemaStatus",
    "SessionStore",
    "SqliteJobStore",
    "SqlitePresetStore",
    "SqliteSessionStore",
    "decode_job_cursor",
    "decode_preset_cursor",
    "encode_job_cursor",
    "encode_preset_cursor",
    "inspect_job_schema",
    "inspect_preset_schema",
    "inspect_session_schema",
]
