"""Opaque page cursors: base64url without padding over a small, strictly parsed payload.

Job cursors carry ``"<created>:<id>"`` of the last item shown; preset cursors carry the last
name. Decoding is strict (canonical encoding only), so a cursor either round-trips exactly or
is refused with a clear ``invalid_request``.
"""

from __future__ import annotations

import base64
import binascii
import re

from imagebridge.contract.errors import BridgeError
from imagebridge.storage.rules.presets import check_preset_name
from imagebridge.storage.rules.values import MAX_INTEGER, is_canonical_uuid

__all__ = [
    "MAX_CURSOR_CHARS",
    "decode_job_cursor",
    "decode_preset_cursor",
    "encode_job_cursor",
    "encode_preset_cursor",
]

MAX_CURSOR_CHARS = 256
"""Longest cursor text accepted; real cursors are under 80 characters."""

_ALPHABET = re.compile(r"[A-Za-z0-9_-]+")
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")


def _encode(payload: str) -> str:
    return base64.urlsafe_b64encode(payload.encode("utf-8")).rstrip(b"=").decode("ascii")


def _decode(cursor: object) -> str | None:
    if (
        not isinstance(cursor, str)
        or len(cursor) > MAX_CURSOR_CHARS
        or _ALPHABET.fullmatch(cursor) is None
        or len(cursor) % 4 == 1
    ):
        return None
    padded = cursor + "=" * (-len(cursor) % 4)
    try:
        raw = base64.b64decode(padded, altchars=b"-_", validate=True)
        payload = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    # Only the canonical spelling is accepted, so every cursor has exactly one form.
    return payload if _encode(payload) == cursor else None


def encode_job_cursor(created_at: int, job_id: str) -> str:
    return _encode(f"{created_at}:{job_id}")


def decode_job_cursor(cursor: object) -> tuple[int, str]:
    """``(created, id)`` of the last job of the previous page."""
    payload = _decode(cursor)
    if payload is not None:
        created_text, sep, job_id = payload.partition(":")
        if (
            sep
            and _DECIMAL.fullmatch(created_text) is not None
            and int(created_text) <= MAX_INTEGER
            and is_canonical_uuid(job_id)
        ):
            return int(created_text), job_id
    raise BridgeError.invalid_request("job cursor is malformed", field="cursor")


def encode_preset_cursor(name: str) -> str:
    return _encode(name)


def decode_preset_cursor(cursor: object) -> str:
    """The last preset name of the previous page."""
    payload = _decode(cursor)
    if payload is not None:
        try:
            return check_preset_name(payload)
        except BridgeError:
            pass
    raise BridgeError.invalid_request("preset cursor is malformed", field="cursor")
