"""Session-binding rules: the provider namespace, session keys, thread ids, the timestamp."""

from __future__ import annotations

import time

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.rules.values import check_timestamp, valid_identifier

__all__ = [
    "MAX_SESSION_IDENTIFIER_BYTES",
    "check_binding",
    "check_session_identifier",
    "check_session_key",
    "check_session_provider",
]

MAX_SESSION_IDENTIFIER_BYTES = 512


def check_session_identifier(value: object, label: str, field: str) -> str:
    """Provider, session key and thread id: non-blank, ≤ 512 bytes, no control characters."""
    if not isinstance(value, str) or not valid_identifier(value, MAX_SESSION_IDENTIFIER_BYTES):
        raise BridgeError(ErrorCode.SESSION, f"invalid {label}", details={"field": field})
    return value


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
