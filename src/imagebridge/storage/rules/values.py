"""Checks on the plain values every store takes: text, identifiers, integers, JSON objects."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.records import JsonInput

__all__ = [
    "MAX_INTEGER",
    "bounded_int",
    "check_count",
    "check_timestamp",
    "dump_json_object",
    "has_control_characters",
    "is_canonical_uuid",
    "utf8_size",
    "valid_identifier",
]

MAX_INTEGER = 2**63 - 1
"""Largest integer SQLite (and PostgreSQL ``bigint``) stores: bounds timestamps and budgets."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def has_control_characters(text: str) -> bool:
    """Unicode ``Cc`` characters (what Rust's ``char::is_control`` rejects)."""
    return _CONTROL.search(text) is not None


def utf8_size(text: str) -> int | None:
    """UTF-8 byte length, or ``None`` for text that cannot be stored (lone surrogates)."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def valid_identifier(value: object, max_bytes: int) -> bool:
    """Non-blank text of at most ``max_bytes`` UTF-8 bytes without control characters."""
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


def bounded_int(value: object, low: int, high: int) -> int | None:
    """``value`` when it is a real ``int`` (not ``bool``) within ``low..high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def check_timestamp(value: object, label: str = "now") -> int:
    checked = bounded_int(value, 0, MAX_INTEGER)
    if checked is None:
        raise BridgeError(ErrorCode.INTERNAL, f"{label} must be a non-negative Unix timestamp")
    return checked


def check_count(value: object, label: str) -> int:
    """A non-negative integer bound such as ``max_pending`` or a byte budget."""
    checked = bounded_int(value, 0, MAX_INTEGER)
    if checked is None:
        raise BridgeError(ErrorCode.INTERNAL, f"{label} must be a non-negative integer")
    return checked


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
