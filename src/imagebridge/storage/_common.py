"""What the SQLite and PostgreSQL stores share apart from their SQL.

Each backend keeps its own statements and transactions; everything here works on plain values
before a write or after a read: the checks that open an operation (in the same order, so the
same bad input gets the same error first), the bodies prepared for storage, row → record
conversion, the logical-bytes formula, page building, the schema-version checks and the
``close``/``async with`` plumbing. Keeping these in one place is what makes the two backends
answer alike.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, Protocol, Self, TypeVar

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.cursors import (
    decode_job_cursor,
    decode_preset_cursor,
    encode_job_cursor,
    encode_preset_cursor,
)
from imagebridge.storage.interfaces import ACTIVE_ROW_RESERVE_BYTES, ROW_OVERHEAD_BYTES
from imagebridge.storage.records import (
    CreateResult,
    JobIdentity,
    JobPage,
    JobRecord,
    JobStatistics,
    JobSummary,
    JobVisibility,
    JsonInput,
    PresetPage,
    PresetRecord,
)
from imagebridge.storage.rules import (
    check_count,
    check_description,
    check_failure_status,
    check_fingerprint,
    check_job_id,
    check_limit,
    check_partial_images,
    check_preset_name,
    check_scope,
    check_session_identifier,
    check_stage,
    check_status,
    check_timestamp,
    check_visibility,
    dump_json_object,
    hash_submission_key,
    interrupted_error,
    is_canonical_uuid,
    job_not_found,
    like_contains_pattern,
    normalize_search,
    oversized_error_replacement,
    prompt_search_text,
    queue_full,
    utf8_size,
)

__all__ = [
    "JOB_RECORD_COLUMNS",
    "JOB_STORE",
    "JOB_SUMMARY_COLUMNS",
    "MAX_QUEUED_IDENTITIES",
    "PRESET_COLUMNS",
    "PRESET_STORE",
    "SESSION_STORE",
    "TERMINAL_SQL",
    "CancelStep",
    "HistoryQuery",
    "Row",
    "StoreKind",
    "StoreLifecycle",
    "active_row_bytes",
    "cancel_step",
    "check_binding",
    "check_body_limits",
    "check_capacity",
    "check_failure",
    "check_finishable",
    "check_history_update",
    "check_job_lookup",
    "check_migration_numbers",
    "check_not_newer",
    "check_preset_page",
    "check_preset_write",
    "check_progress",
    "check_queued_page",
    "check_session_key",
    "check_session_provider",
    "check_submission",
    "check_transition",
    "history_change",
    "history_query",
    "is_plain_identifier",
    "job_id_taken",
    "job_identity",
    "job_page",
    "job_record",
    "job_statistics",
    "job_summary",
    "logical_bytes_sql",
    "prepare_error",
    "prepare_interruption",
    "prepare_result",
    "prepare_submission",
    "preset_exists",
    "preset_page",
    "preset_record",
    "prune_cutoff",
    "replaced_preset",
    "replayed",
]

MAX_QUEUED_IDENTITIES = 10_000
"""Largest page ``queued_identities`` returns."""

TERMINAL_SQL = "('succeeded', 'failed', 'cancelled', 'interrupted')"
"""The finished statuses as an SQL list, valid in both dialects."""


# -- store plumbing --------------------------------------------------------------------------

_PLAIN_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


def is_plain_identifier(name: str) -> bool:
    """Whether ``name`` may be put into SQL text unquoted (table, column, component)."""
    return _PLAIN_IDENTIFIER.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class StoreKind:
    """How a store names itself in errors, and the code every one of its failures carries.

    One value per kind of store, so both backends (and the factories) fail alike.
    """

    label: str
    code: ErrorCode


JOB_STORE = StoreKind("durable job database", ErrorCode.INTERNAL)
PRESET_STORE = StoreKind("preset database", ErrorCode.INTERNAL)
SESSION_STORE = StoreKind("session database", ErrorCode.SESSION)


class _Closable(Protocol):
    async def close(self) -> None: ...


DatabaseT = TypeVar("DatabaseT", bound=_Closable)


class StoreLifecycle(Generic[DatabaseT]):
    """``close`` and ``async with`` for a store that owns one database handle, ``_db``."""

    _db: DatabaseT

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def check_migration_numbers(versions: Sequence[int]) -> None:
    """A schema's migrations are numbered 1..n in order, so its version is their count."""
    if list(versions) != list(range(1, len(versions) + 1)):
        raise ValueError("migrations must be numbered 1..n in order")


def check_not_newer(
    recorded: Iterable[int], current_version: int, code: ErrorCode, label: str
) -> None:
    """Refuse a database a newer bridge has migrated: this one would misread it."""
    newest = max(recorded, default=0)
    if newest > current_version:
        raise BridgeError(
            code,
            f"{label} schema version {newest} is newer than this bridge supports",
            details={"version": newest, "current_version": current_version},
        )


# -- accounting ------------------------------------------------------------------------------

_LOGICAL_TEXT_COLUMNS = (
    "id",
    "auth_scope",
    "request_json",
    "prompt_search",
    "submission_key_hash",
    "request_fingerprint",
)


def logical_bytes_sql(octets: Callable[[str], str]) -> str:
    """A job row's logical size as SQL, given the dialect's "UTF-8 bytes of a column, or 0".

    Text columns, a fixed reserve while the job is queued or running (else its result and
    error), plus a per-row overhead: the SQL twin of :func:`active_row_bytes`.
    """
    return (
        "("
        + " + ".join(octets(column) for column in _LOGICAL_TEXT_COLUMNS)
        + f" + CASE WHEN status IN ('queued', 'running') THEN {ACTIVE_ROW_RESERVE_BYTES} ELSE "
        + octets("response_json")
        + " + "
        + octets("error_json")
        + f" END + {ROW_OVERHEAD_BYTES})"
    )


def active_row_bytes(*texts: str | None) -> int:
    """What a new queued row is charged: the Python twin of :func:`logical_bytes_sql`."""
    fixed = sum(0 if text is None else len(text.encode("utf-8")) for text in texts)
    return fixed + ACTIVE_ROW_RESERVE_BYTES + ROW_OVERHEAD_BYTES


# -- rows ------------------------------------------------------------------------------------


class Row(Protocol):
    """A result row addressed by column name: ``sqlite3.Row`` or a psycopg ``dict_row``."""

    def __getitem__(self, key: str, /) -> Any: ...


JOB_RECORD_COLUMNS = (
    "id",
    "auth_scope",
    "status",
    "created_at",
    "updated_at",
    "started_at",
    "completed_at",
    "request_json",
    "prompt_search",
    "progress_stage",
    "partial_images",
    "response_json",
    "error_json",
    "cancel_requested",
    "favorite",
    "deleted_at",
    "submission_key_hash",
    "request_fingerprint",
    "logical_bytes",
)
"""What :func:`job_record` reads, in the order both backends select it."""

JOB_SUMMARY_COLUMNS = (
    "id",
    "status",
    "created_at",
    "updated_at",
    "started_at",
    "completed_at",
    "progress_stage",
    "partial_images",
    "cancel_requested",
    "favorite",
    "deleted_at",
)
"""What :func:`job_summary` reads: no request, result or error bodies."""


def job_record(row: Row, *, provider: str | None = None) -> JobRecord:
    """A job row (:data:`JOB_RECORD_COLUMNS`) as a record; flags become ``bool``."""
    return JobRecord(
        id=row["id"],
        auth_scope=row["auth_scope"],
        status=ImageJobStatus(row["status"]),
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
        started_at=row["started_at"],
        completed_at=row["completed_at"],
        request_json=row["request_json"],
        prompt_search=row["prompt_search"] or "",
        progress_stage=row["progress_stage"],
        partial_images=int(row["partial_images"] or 0),
        response_json=row["response_json"],
        error_json=row["error_json"],
        cancel_requested=bool(row["cancel_requested"]),
        favorite=bool(row["favorite"]),
        deleted_at=row["deleted_at"],
        submission_key_hash=row["submission_key_hash"],
        request_fingerprint=row["request_fingerprint"],
        logical_bytes=int(row["logical_bytes"] or 0),
        provider=provider,
    )


def job_summary(row: Row) -> JobSummary:
    """A listed job row (:data:`JOB_SUMMARY_COLUMNS`) as a summary."""
    return JobSummary(
        id=row["id"],
        status=ImageJobStatus(row["status"]),
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
        started_at=row["started_at"],
        completed_at=row["completed_at"],
        progress_stage=row["progress_stage"],
        partial_images=int(row["partial_images"] or 0),
        cancel_requested=bool(row["cancel_requested"]),
        favorite=bool(row["favorite"]),
        deleted_at=row["deleted_at"],
    )


def job_page(rows: Sequence[Row], limit: int) -> JobPage:
    """A page from ``limit + 1`` fetched rows: the extra row only says that more follow."""
    items = [job_summary(row) for row in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = items[-1]
        next_cursor = encode_job_cursor(last.created_at, last.id)
    return JobPage(items=items, next_cursor=next_cursor)


PRESET_COLUMNS = "name, description, template_json, created_at, updated_at"
"""What :func:`preset_record` reads, in this order."""


def preset_record(row: Sequence[Any]) -> PresetRecord:
    """A :data:`PRESET_COLUMNS` row as a record."""
    name, description, template_json, created_at, updated_at = row
    return PresetRecord(
        name=name,
        description=description,
        template_json=template_json,
        created_at=int(created_at),
        updated_at=int(updated_at),
    )


def preset_page(rows: Sequence[Sequence[Any]], limit: int) -> PresetPage:
    """A page from ``limit + 1`` fetched preset rows (see :func:`job_page`)."""
    items = [preset_record(row) for row in rows[:limit]]
    next_cursor = encode_preset_cursor(items[-1].name) if len(rows) > limit else None
    return PresetPage(items=items, next_cursor=next_cursor)


# -- job submission --------------------------------------------------------------------------


def check_body_limits(max_result_bytes: int, max_error_bytes: int) -> None:
    """The result and error size limits a job store is opened with."""
    for label, value in (
        ("max_result_bytes", max_result_bytes),
        ("max_error_bytes", max_error_bytes),
    ):
        check_count(value, label)


def check_submission(
    scope: str,
    job_id: str,
    prompt: str,
    *,
    submission_key: str | None,
    fingerprint: str | None,
    now: int,
    max_pending: int,
    max_database_bytes: int,
) -> str | None:
    """The checks ``create`` makes before any work; returns the submission key's hash."""
    check_scope(scope)
    check_job_id(job_id)
    check_timestamp(now)
    check_count(max_pending, "max_pending")
    check_count(max_database_bytes, "max_database_bytes")
    if not isinstance(prompt, str) or utf8_size(prompt) is None:
        raise BridgeError.invalid_request("prompt must be UTF-8 text", field="prompt")
    key_hash = None if submission_key is None else hash_submission_key(submission_key)
    if fingerprint is not None:
        check_fingerprint(fingerprint)
    if key_hash is not None and fingerprint is None:
        raise BridgeError(ErrorCode.INTERNAL, "a submission key needs a request fingerprint")
    return key_hash


def prepare_submission(
    request_json: JsonInput,
    prompt: str,
    *,
    job_id: str,
    scope: str,
    key_hash: str | None,
    fingerprint: str | None,
) -> tuple[str, str, int]:
    """The stored request text (no idempotency key), its search text and the row's charge.

    Serializing a large request is slow: call this off the event loop.
    """
    request_text, _ = dump_json_object(
        request_json,
        "request",
        drop_keys=("idempotency_key",),
        code=ErrorCode.INVALID_REQUEST,
    )
    search = prompt_search_text(prompt)
    size = active_row_bytes(job_id, scope, request_text, search, key_hash, fingerprint)
    return request_text, search, size


def replayed(existing: JobRecord, fingerprint: str | None) -> CreateResult:
    """The job an earlier submission under the same key made; another request conflicts."""
    if existing.request_fingerprint == fingerprint:
        return CreateResult(job=existing, created=False)
    raise BridgeError(
        ErrorCode.IDEMPOTENCY_CONFLICT,
        "idempotency key was already used for a different request",
    )


def check_capacity(
    queued: int, used_bytes: int, new_bytes: int, *, max_pending: int, max_database_bytes: int
) -> None:
    """Refuse new work when the queue or the logical byte budget is full."""
    if queued >= max_pending:
        raise queue_full("max_pending")
    if used_bytes + new_bytes > max_database_bytes:
        raise queue_full("max_database_bytes")


def job_id_taken() -> BridgeError:
    return BridgeError(ErrorCode.INTERNAL, "durable job id is already in use")


# -- job transitions -------------------------------------------------------------------------


def prepare_result(response_json: JsonInput, limit: int) -> str:
    """A result's JSON text; above ``limit`` it is refused so the caller can trim it."""
    text, size = dump_json_object(response_json, "result")
    if size > limit:
        raise BridgeError(
            ErrorCode.ARTIFACT,
            "durable job result metadata exceeds the storage reserve",
            details={"result_bytes": size, "max_result_bytes": limit},
        )
    return text


def prepare_error(error_json: JsonInput, limit: int) -> str:
    """An error's JSON text; above ``limit`` it is replaced by a short ``internal`` one."""
    text, size = dump_json_object(error_json, "error")
    if size > limit:
        replacement = oversized_error_replacement(json.loads(text), size)
        text, _ = dump_json_object(replacement, "error")
    return text


def check_transition(scope: str, now: int) -> None:
    """The checks ``claim``, ``succeed`` and ``request_cancel`` make before any work."""
    check_scope(scope)
    check_timestamp(now)


def check_progress(scope: str, stage: str, partial_images: int, now: int) -> None:
    """The checks ``progress`` makes before any work."""
    check_scope(scope)
    check_stage(stage)
    check_partial_images(partial_images)
    check_timestamp(now)


def check_failure(scope: str, status: ImageJobStatus | str, now: int) -> ImageJobStatus:
    """The checks ``fail`` makes; returns the final status it asked for."""
    check_scope(scope)
    final = check_failure_status(status)
    check_timestamp(now)
    return final


def check_finishable(current: JobRecord, now: int) -> int:
    """Only a running job finishes; returns its finish time (never before its last update)."""
    if current.status is not ImageJobStatus.RUNNING:
        raise BridgeError(
            ErrorCode.INTERNAL,
            "durable job is not running",
            details={"status": current.status.value},
        )
    return max(now, current.updated_at)


class CancelStep(Enum):
    """What ``request_cancel`` does to a job, by its state."""

    CANCEL = "cancel"
    """Queued: cancelled at once."""
    FLAG = "flag"
    """Running and not yet flagged: flagged for its worker to stop."""
    KEEP = "keep"
    """Already flagged or finished: left as it is."""


def cancel_step(current: JobRecord) -> CancelStep:
    if current.status is ImageJobStatus.QUEUED:
        return CancelStep.CANCEL
    if current.status is ImageJobStatus.RUNNING and not current.cancel_requested:
        return CancelStep.FLAG
    return CancelStep.KEEP


def prepare_interruption(now: int) -> str:
    """Check ``now``; the error text every job marked ``interrupted`` gets (restart, lease)."""
    check_timestamp(now)
    text, _ = dump_json_object(interrupted_error(), "error")
    return text


def check_queued_page(limit: int, after: JobIdentity | None) -> None:
    """The page size and resume point of ``queued_identities``."""
    check_limit(limit, MAX_QUEUED_IDENTITIES)
    if after is not None and not isinstance(after, JobIdentity):
        raise BridgeError(ErrorCode.INTERNAL, "after must be a JobIdentity")


def job_identity(row: Sequence[Any]) -> JobIdentity:
    """An ``auth_scope, id, created_at`` row as a queued job's identity."""
    auth_scope, job_id, created_at = row
    return JobIdentity(auth_scope=auth_scope, id=job_id, created_at=int(created_at))


# -- history ---------------------------------------------------------------------------------


def check_job_lookup(scope: str, job_id: str) -> None:
    """A malformed id is simply not found: ids are never echoed as errors of their own."""
    check_scope(scope)
    if not isinstance(job_id, str) or not is_canonical_uuid(job_id):
        raise job_not_found()


def check_history_update(
    scope: str, *, favorite: bool | None, deleted: bool | None, now: int
) -> None:
    check_scope(scope)
    check_timestamp(now)
    if favorite is None and deleted is None:
        raise BridgeError.invalid_request("history update must change favorite or deleted state")
    for label, value in (("favorite", favorite), ("deleted", deleted)):
        if value is not None and not isinstance(value, bool):
            raise BridgeError.invalid_request(f"{label} must be a boolean", field=label)


def history_change(
    current: JobRecord, *, favorite: bool | None, deleted: bool | None, now: int
) -> tuple[bool, int | None, int]:
    """The new ``(favorite, deleted_at, updated_at)``; only finished jobs are (un)deleted."""
    if deleted is not None and not current.status.terminal:
        raise BridgeError.invalid_request(
            "only finished jobs can be deleted or restored",
            field="deleted",
            status=current.status.value,
        )
    stamp = max(now, current.updated_at)
    new_favorite = current.favorite if favorite is None else favorite
    new_deleted = current.deleted_at
    if deleted is not None:
        new_deleted = stamp if deleted else None
    return new_favorite, new_deleted, stamp


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """A checked history listing: its SQL conditions, their named parameters, the page size.

    ``params["fetch"]`` is ``limit + 1``: the extra row tells :func:`job_page` more follow.
    """

    where: str
    params: dict[str, Any]
    limit: int
    fetch: str
    """The dialect's placeholder for ``params["fetch"]``."""

    def select(self, table: str) -> str:
        """The page's statement: what :func:`job_page` reads, in the cursor's order."""
        return (
            f"SELECT {', '.join(JOB_SUMMARY_COLUMNS)} FROM {table} "  # noqa: S608
            f"WHERE {self.where} ORDER BY created_at DESC, id DESC LIMIT {self.fetch}"
        )


def history_query(
    scope: str,
    *,
    visibility: JobVisibility | str,
    status: ImageJobStatus | str | None,
    favorite: bool | None,
    search: str | None,
    cursor: str | None,
    limit: int,
    placeholder: str,
    before_position: str,
) -> HistoryQuery:
    """Check a ``list`` call and build its conditions for one SQL dialect.

    ``placeholder`` formats a named parameter (``":{}"``, ``"%({})s"``); ``before_position``
    is the dialect's "row sorts after the cursor (``created``, ``after_id``)" condition.
    """
    check_scope(scope)
    shown = check_visibility(visibility)
    wanted = None if status is None else check_status(status)
    if favorite is not None and not isinstance(favorite, bool):
        raise BridgeError.invalid_request("favorite must be a boolean", field="favorite")
    needle = normalize_search(search)
    position = None if cursor is None else decode_job_cursor(cursor)
    check_limit(limit)

    def condition(template: str, name: str) -> str:
        return template.format(placeholder.format(name))

    clauses = [condition("auth_scope = {}", "scope")]
    params: dict[str, Any] = {"scope": scope, "fetch": limit + 1}
    if shown is JobVisibility.ACTIVE:
        clauses.append("deleted_at IS NULL")
    elif shown is JobVisibility.HIDDEN:
        clauses.append("deleted_at IS NOT NULL")
    if wanted is not None:
        clauses.append(condition("status = {}", "status"))
        params["status"] = wanted.value
    if favorite is not None:
        clauses.append(condition("favorite = {}", "favorite"))
        params["favorite"] = favorite
    if needle is not None:
        clauses.append(condition("prompt_search LIKE {} ESCAPE '\\'", "pattern"))
        params["pattern"] = like_contains_pattern(needle)
    if position is not None:
        clauses.append(before_position)
        params["created"], params["after_id"] = position
    return HistoryQuery(
        where=" AND ".join(clauses),
        params=params,
        limit=limit,
        fetch=placeholder.format("fetch"),
    )


def prune_cutoff(
    *, now: int, retention_secs: int, max_retained: int, max_retained_bytes: int
) -> int:
    """Check ``prune``'s bounds; rows completed at or before the returned time expire."""
    check_timestamp(now)
    check_count(retention_secs, "retention_secs")
    check_count(max_retained, "max_retained")
    check_count(max_retained_bytes, "max_retained_bytes")
    return now - retention_secs


def job_statistics(
    status_counts: Iterable[tuple[Any, Any]],
    *,
    hidden: Any,
    database_bytes: Any,
    logical_bytes: Any,
) -> JobStatistics:
    """Statistics from ``(status, count)`` rows and the backend's totals."""
    counts = {status.value: 0 for status in ImageJobStatus}
    for status, count in status_counts:
        counts[str(status)] = int(count)
    return JobStatistics(
        total=sum(counts.values()),
        queued=counts["queued"],
        running=counts["running"],
        succeeded=counts["succeeded"],
        failed=counts["failed"],
        cancelled=counts["cancelled"],
        interrupted=counts["interrupted"],
        hidden=int(hidden),
        database_bytes=int(database_bytes),
        logical_bytes=int(logical_bytes),
    )


# -- presets and sessions --------------------------------------------------------------------


def check_preset_write(name: str, description: str | None, now: int) -> None:
    """The checks ``create`` and ``replace`` make before preparing the template."""
    check_preset_name(name)
    check_description(description)
    check_timestamp(now)


def replaced_preset(
    existing: PresetRecord, description: str | None, template_json: str, now: int
) -> PresetRecord:
    """What ``replace`` stores: ``created`` kept, ``updated`` never moving backwards."""
    stamp = max(now, existing.updated_at)
    return PresetRecord(existing.name, description, template_json, existing.created_at, stamp)


def check_preset_page(cursor: str | None, limit: int) -> str | None:
    """The checks ``list`` makes; returns the name the page starts after."""
    after = None if cursor is None else decode_preset_cursor(cursor)
    check_limit(limit)
    return after


def preset_exists() -> BridgeError:
    return BridgeError(
        ErrorCode.IDEMPOTENCY_CONFLICT,
        "a preset with this name already exists",
        details={"field": "name", "resource": "preset"},
    )


def check_session_key(key: str) -> str:
    return check_session_identifier(key, "session key", "key")


def check_session_provider(provider: str) -> str:
    """The provider namespace a session store is opened for."""
    return check_session_identifier(provider, "session provider", "provider")


def check_binding(key: str, thread_id: str, now: int | None) -> int:
    """The checks ``put`` makes; returns its timestamp (the clock's when ``now`` is ``None``)."""
    check_session_key(key)
    check_session_identifier(thread_id, "thread id", "thread_id")
    stamp = int(time.time()) if now is None else now
    check_timestamp(stamp)
    return stamp
