"""Backend-independent rules for stored data: identifiers, JSON bodies, search, errors.

Every store backend (SQLite now, PostgreSQL later) checks its inputs with these functions, so
the same input is refused with the same code and message whatever the backend.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.interfaces import MAX_PAGE_LIMIT
from imagebridge.storage.records import JobVisibility, JsonInput

__all__ = [
    "FAILURE_STATUSES",
    "MAX_INTEGER",
    "MAX_PARTIAL_IMAGES",
    "MAX_SCOPE_BYTES",
    "MAX_SEARCH_BYTES",
    "MAX_SESSION_IDENTIFIER_BYTES",
    "MAX_STAGE_BYTES",
    "MAX_SUBMISSION_KEY_BYTES",
    "check_count",
    "check_description",
    "check_failure_status",
    "check_fingerprint",
    "check_job_id",
    "check_limit",
    "check_partial_images",
    "check_preset_name",
    "check_scope",
    "check_session_identifier",
    "check_stage",
    "check_status",
    "check_timestamp",
    "check_visibility",
    "dump_json_object",
    "has_control_characters",
    "hash_submission_key",
    "interrupted_error",
    "is_canonical_uuid",
    "job_not_found",
    "like_contains_pattern",
    "normalize_search",
    "oversized_error_replacement",
    "prepare_template",
    "preset_not_found",
    "prompt_search_text",
    "queue_full",
    "utf8_size",
]

MAX_SCOPE_BYTES = 256
MAX_SUBMISSION_KEY_BYTES = 512
MAX_STAGE_BYTES = 64
MAX_SEARCH_BYTES = 512
MAX_DESCRIPTION_BYTES = 512
MAX_SESSION_IDENTIFIER_BYTES = 512
MAX_PARTIAL_IMAGES = 4_294_967_295
MAX_INTEGER = 2**63 - 1
"""Largest integer SQLite (and PostgreSQL ``bigint``) stores: bounds timestamps and budgets."""

FAILURE_STATUSES = frozenset(
    {ImageJobStatus.FAILED, ImageJobStatus.CANCELLED, ImageJobStatus.INTERRUPTED}
)

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_STAGE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PRESET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_FORBIDDEN_TEMPLATE_KEYS = ("images", "reference_images", "mask", "idempotency_key", "version")


# -- small predicates ------------------------------------------------------------------------


def has_control_characters(text: str) -> bool:
    """Unicode ``Cc`` characters (what Rust's ``char::is_control`` rejects)."""
    return _CONTROL.search(text) is not None


def utf8_size(text: str) -> int | None:
    """UTF-8 byte length, or ``None`` for text that cannot be stored (lone surrogates)."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def _valid_identifier(value: object, max_bytes: int) -> bool:
    if not isinstance(value, str) or not value.strip():
        return False
    size = utf8_size(value)
    return size is not None and size <= max_bytes and not has_control_characters(value)


def is_canonical_uuid(value: str) -> bool:
    """Lower-case hyphenated UUID text, the only id form the stores write."""
    try:
        return str(uuid.UUID(value)) == value
    except (ValueError, TypeError, AttributeError):
        return False


def _bounded_int(value: object, low: int, high: int) -> int | None:
    """``value`` when it is a real ``int`` (not ``bool``) within ``low..high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


# -- job rules -------------------------------------------------------------------------------


def check_scope(scope: object) -> str:
    """Ownership scope: non-empty, ≤ 256 bytes, no control characters."""
    if not isinstance(scope, str) or not _valid_identifier(scope, MAX_SCOPE_BYTES):
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
    if not isinstance(key, str) or not _valid_identifier(key, MAX_SUBMISSION_KEY_BYTES):
        raise BridgeError.invalid_request("invalid idempotency key", field="idempotency_key")
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_fingerprint(fingerprint: object) -> str:
    if not isinstance(fingerprint, str) or _SHA256_HEX.fullmatch(fingerprint) is None:
        raise BridgeError(
            ErrorCode.INTERNAL, "request fingerprints must be lower-case SHA-256 hex digests"
        )
    return fingerprint


def check_timestamp(value: object, label: str = "now") -> int:
    checked = _bounded_int(value, 0, MAX_INTEGER)
    if checked is None:
        raise BridgeError(ErrorCode.INTERNAL, f"{label} must be a non-negative Unix timestamp")
    return checked


def check_count(value: object, label: str) -> int:
    """A non-negative integer bound such as ``max_pending`` or a byte budget."""
    checked = _bounded_int(value, 0, MAX_INTEGER)
    if checked is None:
        raise BridgeError(ErrorCode.INTERNAL, f"{label} must be a non-negative integer")
    return checked


def check_limit(limit: object, maximum: int = MAX_PAGE_LIMIT) -> int:
    checked = _bounded_int(limit, 1, maximum)
    if checked is None:
        raise BridgeError.invalid_request(f"limit must be between 1 and {maximum}", field="limit")
    return checked


def check_stage(stage: object) -> str:
    """Progress stage label: 1–64 bytes of ``[A-Za-z0-9_-]`` (never prompt text)."""
    if not isinstance(stage, str) or _STAGE.fullmatch(stage) is None:
        raise BridgeError.invalid_request("invalid durable job progress stage", field="stage")
    return stage


def check_partial_images(count: object) -> int:
    checked = _bounded_int(count, 0, MAX_PARTIAL_IMAGES)
    if checked is None:
        raise BridgeError.invalid_request(
            "partial image count is out of range", field="partial_images"
        )
    return checked


def check_status(status: str) -> ImageJobStatus:
    try:
        return ImageJobStatus(status)
    except ValueError:
        raise BridgeError.invalid_request("unknown durable job status", field="status") from None


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


def check_visibility(visibility: str) -> JobVisibility:
    try:
        return JobVisibility(visibility)
    except ValueError:
        raise BridgeError.invalid_request(
            "visibility must be active, hidden or all", field="visibility"
        ) from None


def prompt_search_text(prompt: str) -> str:
    """What search matches against: the prompt with Unicode lower-casing.

    NUL becomes U+0001: SQL ``LIKE`` stops reading text at a NUL, and since a search may not
    contain control characters, no match can span either character anyway.
    """
    return prompt.lower().replace("\x00", "\x01")


def normalize_search(search: str | None) -> str | None:
    """Trimmed, checked, lower-cased search text; ``None`` when there is nothing to match."""
    if search is None:
        return None
    if not isinstance(search, str):
        raise BridgeError.invalid_request("search must be text", field="search")
    trimmed = search.strip()
    if not trimmed:
        return None
    size = utf8_size(trimmed)
    if size is None or size > MAX_SEARCH_BYTES or has_control_characters(trimmed):
        raise BridgeError.invalid_request(
            f"search must be at most {MAX_SEARCH_BYTES} bytes without control characters",
            field="search",
        )
    return prompt_search_text(trimmed)


def like_contains_pattern(needle: str, escape: str = "\\") -> str:
    """A LIKE pattern matching ``needle`` literally anywhere (``%``, ``_``, escape escaped)."""
    escaped = (
        needle.replace(escape, escape + escape)
        .replace("%", escape + "%")
        .replace("_", escape + "_")
    )
    return f"%{escaped}%"


# -- JSON bodies -----------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def dump_json_object(
    value: JsonInput,
    label: str,
    *,
    drop_keys: tuple[str, ...] = (),
    code: ErrorCode = ErrorCode.INTERNAL,
) -> tuple[str, int]:
    """Compact JSON text of an object and its UTF-8 size; ``drop_keys`` are removed first.

    Text input is kept byte-for-byte unless a key must be dropped. Anything that is not a
    JSON object (or holds NaN, infinities or unencodable text) is refused with ``code``.
    """
    try:
        if isinstance(value, str):
            parsed = json.loads(value, parse_constant=_reject_constant)
            if not isinstance(parsed, dict):
                raise ValueError("not an object")
            if any(key in parsed for key in drop_keys):
                text = _dumps({k: v for k, v in parsed.items() if k not in drop_keys})
            else:
                text = value
        elif isinstance(value, Mapping):
            text = _dumps({k: v for k, v in value.items() if k not in drop_keys})
        else:
            raise TypeError("not a mapping")
    except (TypeError, ValueError, RecursionError):
        raise BridgeError(
            code, f"{label} must be a JSON object", details={"field": label}
        ) from None
    size = utf8_size(text)
    if size is None:
        raise BridgeError(code, f"{label} contains text that cannot be stored as UTF-8")
    return text, size


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# -- job errors ------------------------------------------------------------------------------


def job_not_found() -> BridgeError:
    return BridgeError.invalid_request("durable job was not found", resource="job")


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


# -- presets ---------------------------------------------------------------------------------


def preset_not_found() -> BridgeError:
    return BridgeError.invalid_request("preset was not found", resource="preset")


def check_preset_name(name: object) -> str:
    if not isinstance(name, str) or _PRESET_NAME.fullmatch(name) is None:
        raise BridgeError.invalid_request(
            "preset names are 1-64 ASCII letters, digits, '.', '_' or '-' and start with "
            "a letter or digit",
            field="name",
        )
    return name


def check_description(description: object) -> str | None:
    if description is None:
        return None
    size = utf8_size(description) if isinstance(description, str) else None
    if (
        not isinstance(description, str)
        or size is None
        or size > MAX_DESCRIPTION_BYTES
        or has_control_characters(description)
    ):
        raise BridgeError.invalid_request(
            f"preset description must be at most {MAX_DESCRIPTION_BYTES} bytes without "
            "control characters",
            field="description",
        )
    return description


def prepare_template(template: JsonInput, max_bytes: int) -> str:
    """Checked template JSON: an object without inputs or keys, with a non-blank prompt."""
    text, size = dump_json_object(template, "template", code=ErrorCode.INVALID_REQUEST)
    if size > max_bytes:
        raise BridgeError.invalid_request(
            f"preset template must be at most {max_bytes} bytes of JSON",
            field="template",
            max_bytes=max_bytes,
        )
    parsed = json.loads(text)
    for key in _FORBIDDEN_TEMPLATE_KEYS:
        if key in parsed:
            raise BridgeError.invalid_request(
                f"preset templates cannot contain {key}", field=f"template.{key}"
            )
    prompt = parsed.get("prompt")
    if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
        raise BridgeError.invalid_request(
            "preset template prompt must not be blank", field="template.prompt"
        )
    return text


# -- sessions --------------------------------------------------------------------------------


def check_session_identifier(value: object, label: str, field: str) -> str:
    """Provider, session key and thread id: non-blank, ≤ 512 bytes, no control characters."""
    if not isinstance(value, str) or not _valid_identifier(value, MAX_SESSION_IDENTIFIER_BYTES):
        raise BridgeError(ErrorCode.SESSION, f"invalid {label}", details={"field": field})
    return value
