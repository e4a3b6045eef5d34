"""Job rules: identifiers, submission, the logical-bytes accounting, transitions, job errors.

Accounting: each job row has a *logical* size (its text columns, a fixed reserve while it is
queued or running, else its result and error, plus a per-row overhead). New work is refused
when the queue or that budget is full; :func:`logical_bytes_sql` is the formula as SQL, for
the backends to store or generate, and :func:`active_row_bytes` its Python twin.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.records import CreateResult, JobOrigin, JobRecord, JsonInput
from imagebridge.storage.rules.values import (
    bounded_int,
    check_count,
    check_timestamp,
    dump_json_object,
    is_canonical_uuid,
    utf8_size,
    valid_identifier,
)

__all__ = [
    "ACTIVE_ROW_RESERVE_BYTES",
    "FAILURE_STATUSES",
    "MAX_ERROR_JSON_BYTES",
    "MAX_PARTIAL_IMAGES",
    "MAX_RESULT_JSON_BYTES",
    "MAX_SCOPE_BYTES",
    "MAX_STAGE_BYTES",
    "MAX_SUBMISSION_KEY_BYTES",
    "ROW_OVERHEAD_BYTES",
    "CancelStep",
    "active_row_bytes",
    "cancel_step",
    "check_body_limits",
    "check_capacity",
    "check_failure",
    "check_failure_status",
    "check_fingerprint",
    "check_finishable",
    "check_job_id",
    "check_job_lookup",
    "check_origin",
    "check_partial_images",
    "check_progress",
    "check_record",
    "check_retry_lookup",
    "check_scope",
    "check_stage",
    "check_submission",
    "check_transition",
    "hash_submission_key",
    "hash_sync_key",
    "interrupted_error",
    "job_id_taken",
    "job_not_found",
    "logical_bytes_sql",
    "oversized_error_replacement",
    "prepare_error",
    "prepare_interruption",
    "prepare_result",
    "prepare_submission",
    "prompt_search_text",
    "queue_full",
    "replayed",
]

ACTIVE_ROW_RESERVE_BYTES = 262_144
"""Logical bytes charged to a queued or running job: room for its future result.

With :data:`ROW_OVERHEAD_BYTES` this is a fixed unit of the on-disk accounting (cached per
row), not a tunable: a budget is tuned through ``max_database_bytes`` instead.
"""

ROW_OVERHEAD_BYTES = 128
"""Logical bytes charged to every job row on top of its text columns."""

MAX_RESULT_JSON_BYTES = ACTIVE_ROW_RESERVE_BYTES
"""Largest stored job result (response JSON); a result must fit the reserve it was charged."""

MAX_ERROR_JSON_BYTES = ACTIVE_ROW_RESERVE_BYTES
"""Largest stored job error JSON; larger errors are replaced by a short ``internal`` one."""

MAX_SCOPE_BYTES = 256
MAX_SUBMISSION_KEY_BYTES = 512
MAX_STAGE_BYTES = 64
MAX_PARTIAL_IMAGES = 4_294_967_295

FAILURE_STATUSES = frozenset(
    {ImageJobStatus.FAILED, ImageJobStatus.CANCELLED, ImageJobStatus.INTERRUPTED}
)

_STAGE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


# -- identifiers and values ------------------------------------------------------------------


def check_scope(scope: object) -> str:
    """Ownership scope: non-empty, ≤ 256 bytes, no control characters."""
    if not isinstance(scope, str) or not valid_identifier(scope, MAX_SCOPE_BYTES):
        raise BridgeError.invalid_request("invalid durable job ownership scope")
    return scope


def check_job_id(job_id: object) -> str:
    if not isinstance(job_id, str) or not is_canonical_uuid(job_id):
        raise BridgeError(
            ErrorCode.INTERNAL,
            "durable job ids must be canonical UUIDs",
            details={"field": "id"},
        )
    return job_id


def hash_submission_key(key: object) -> str:
    """SHA-256 hex of an idempotency key; only the hash is ever stored."""
    if not isinstance(key, str) or not valid_identifier(key, MAX_SUBMISSION_KEY_BYTES):
        raise BridgeError.invalid_request("invalid idempotency key", field="idempotency_key")
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def hash_sync_key(key: object) -> str:
    """SHA-256 hex of a synchronous request's ``Idempotency-Key``, in a namespace of its own.

    Synchronous requests and job submissions keep apart (as in the original, whose
    synchronous coordinator and job store were separate): the same key on ``POST /v1/jobs``
    and on ``POST /v1/images`` names two things, never a conflict. A key holds no NUL, so
    the prefix cannot be forged by a job key.
    """
    if not isinstance(key, str) or not valid_identifier(key, MAX_SUBMISSION_KEY_BYTES):
        raise BridgeError.invalid_request("invalid idempotency key", field="idempotency_key")
    return hashlib.sha256(b"sync\x00" + key.encode("utf-8")).hexdigest()


def check_origin(origin: object, *, record: bool = False) -> JobOrigin:
    """A history origin (``record``: one a synchronous record may have, never ``job``)."""
    try:
        parsed = JobOrigin(origin) if isinstance(origin, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise BridgeError.invalid_request(
            "origin must be one of " + ", ".join(o.value for o in JobOrigin), field="origin"
        )
    if record and parsed is JobOrigin.JOB:
        raise BridgeError(ErrorCode.INTERNAL, "a synchronous record cannot have origin job")
    return parsed


def check_fingerprint(fingerprint: object) -> str:
    if not isinstance(fingerprint, str) or _SHA256_HEX.fullmatch(fingerprint) is None:
        raise BridgeError(
            ErrorCode.INTERNAL, "request fingerprints must be lower-case SHA-256 hex digests"
        )
    return fingerprint


def check_stage(stage: object) -> str:
    """Progress stage label: 1–64 bytes of ``[A-Za-z0-9_-]`` (never prompt text)."""
    if not isinstance(stage, str) or _STAGE.fullmatch(stage) is None:
        raise BridgeError.invalid_request("invalid durable job progress stage", field="stage")
    return stage


def check_partial_images(count: object) -> int:
    checked = bounded_int(count, 0, MAX_PARTIAL_IMAGES)
    if checked is None:
        raise BridgeError.invalid_request(
            "partial image count is out of range", field="partial_images"
        )
    return checked


def check_failure_status(status: str) -> ImageJobStatus:
    """``fail`` records one of the unsuccessful terminal states only."""
    try:
        parsed = ImageJobStatus(status)
    except ValueError:
        parsed = None
    if parsed not in FAILURE_STATUSES:
        raise BridgeError(
            ErrorCode.INTERNAL,
            "a failed job must end failed, cancelled or interrupted",
            details={"field": "status"},
        )
    assert parsed is not None
    return parsed


def prompt_search_text(prompt: str) -> str:
    """What search matches against: the prompt with Unicode lower-casing.

    NUL becomes U+0001: SQL ``LIKE`` stops reading text at a NUL, and since a search may not
    contain control characters, no match can span either character anyway.
    """
    return prompt.lower().replace("\x00", "\x01")


# -- job errors ------------------------------------------------------------------------------


def job_not_found() -> BridgeError:
    return BridgeError.invalid_request("durable job was not found", resource="job")


def job_id_taken() -> BridgeError:
    return BridgeError(ErrorCode.INTERNAL, "durable job id is already in use")


def queue_full(reason: str) -> BridgeError:
    """Refusal to accept more durable work; ``reason`` names the bound that was hit."""
    return BridgeError(
        ErrorCode.OVERLOADED,
        "durable job queue is full",
        retryable=True,
        details={"limit": reason},
    )


def interrupted_error() -> dict[str, Any]:
    """The error recorded on jobs that were running when the bridge stopped."""
    return BridgeError(
        ErrorCode.CANCELLED,
        "bridge stopped while provider completion was uncertain",
        retryable=False,
        details={"recovery": "inspect_history_before_retrying"},
    ).to_dict()


def oversized_error_replacement(original: Mapping[str, Any] | None, size: int) -> dict[str, Any]:
    """What a failed job stores instead of an error body larger than the limit."""
    details: dict[str, Any] = {"error_bytes": size}
    code = original.get("code") if original is not None else None
    if isinstance(code, str) and code in ErrorCode.__members__.values():
        details["original_code"] = code
    return BridgeError(
        ErrorCode.INTERNAL,
        "durable job failed with oversized error metadata",
        details=details,
    ).to_dict()


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


# -- submission ------------------------------------------------------------------------------


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


def check_record(
    scope: str,
    record_id: str,
    prompt: str,
    *,
    origin: JobOrigin | str,
    sync_key: str | None,
    fingerprint: str,
    now: int,
) -> tuple[JobOrigin, str | None]:
    """The checks ``open_record`` makes; returns the origin and the key's hash.

    A synchronous record always has its request's fingerprint: marked retries without a
    key find the record they repeat by it (``find_retry``).
    """
    check_scope(scope)
    check_job_id(record_id)
    check_timestamp(now)
    if not isinstance(prompt, str) or utf8_size(prompt) is None:
        raise BridgeError.invalid_request("prompt must be UTF-8 text", field="prompt")
    checked = check_origin(origin, record=True)
    check_fingerprint(fingerprint)
    return checked, None if sync_key is None else hash_sync_key(sync_key)


def check_retry_lookup(
    scope: str, origin: JobOrigin | str, fingerprint: str, since: int
) -> JobOrigin:
    """The checks ``find_retry`` makes before any work."""
    check_scope(scope)
    check_fingerprint(fingerprint)
    check_timestamp(since)
    return check_origin(origin, record=True)


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


# -- transitions -----------------------------------------------------------------------------


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


def check_job_lookup(scope: str, job_id: str) -> None:
    """A malformed id is simply not found: ids are never echoed as errors of their own."""
    check_scope(scope)
    if not isinstance(job_id, str) or not is_canonical_uuid(job_id):
        raise job_not_found()
