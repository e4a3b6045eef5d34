"""Strict query strings and provider page cursors.

Query keys are an allow-list: an unknown or repeated key is a 422, so a typo such as
``?limt=5`` is reported instead of silently ignored. An empty value (``?cursor=``) means the
parameter is absent, on every route: the original's SDKs send each unset optional parameter
that way, so refusing it would break them. Provider cursors are the last name of the
previous page, base64url without padding, decoded strictly (canonical form only).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection

from starlette.requests import Request

from imagebridge.contract.errors import BridgeError

__all__ = [
    "MAX_PAGE_LIMIT",
    "decode_provider_cursor",
    "encode_provider_cursor",
    "integer_parameter",
    "page_limit",
    "strict_query",
]

MAX_PAGE_LIMIT = 100
DEFAULT_PAGE_LIMIT = 20
MAX_CURSOR_CHARS = 256
MAX_CURSOR_BYTES = 64
_MAX_DIGITS = 12
_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


def strict_query(request: Request, allowed: Collection[str], message: str) -> dict[str, str]:
    """The query's non-empty values; unknown or repeated keys raise ``invalid_request`` (422).

    A key given with an empty value is left out of the result, so every route reads it as
    absent; it still counts for the unknown and repeated checks.
    """
    seen: set[str] = set()
    values: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key not in allowed or key in seen:
            raise BridgeError.invalid_request(message)
        seen.add(key)
        if value:
            values[key] = value
    return values


def integer_parameter(raw: str | None, *, invalid: str, field: str = "limit") -> int | None:
    """A non-negative decimal query value (``None`` when absent); huge values saturate.

    Range checks are the caller's: a value too long to matter becomes one past any limit,
    so it fails them with the range message instead of costing a big-integer parse.
    """
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit():
        raise BridgeError.invalid_request(invalid, field=field)
    return int(raw) if len(raw) <= _MAX_DIGITS else 10**_MAX_DIGITS


def page_limit(raw: str | None, *, invalid: str, out_of_range: str) -> int:
    value = integer_parameter(raw, invalid=invalid)
    if value is None:
        return DEFAULT_PAGE_LIMIT
    if not 1 <= value <= MAX_PAGE_LIMIT:
        raise BridgeError.invalid_request(out_of_range, field="limit")
    return value


def encode_provider_cursor(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).rstrip(b"=").decode("ascii")


def decode_provider_cursor(raw: str | None) -> str | None:
    """The name after which the page starts, or ``None`` for the first page."""
    if raw is None:
        return None
    if not 1 <= len(raw) <= MAX_CURSOR_CHARS:
        raise BridgeError.invalid_request("provider cursor length is invalid", field="cursor")
    malformed = BridgeError.invalid_request("provider cursor is malformed", field="cursor")
    if _ALPHABET.fullmatch(raw) is None or len(raw) % 4 == 1:
        raise malformed
    try:
        decoded = base64.b64decode(raw + "=" * (-len(raw) % 4), altchars=b"-_", validate=True)
        name = decoded.decode("utf-8")
    except (binascii.Error, ValueError):
        raise malformed from None
    if encode_provider_cursor(name) != raw:
        raise malformed
    if not 1 <= len(decoded) <= MAX_CURSOR_BYTES:
        raise BridgeError.invalid_request("provider cursor length is invalid", field="cursor")
    return name
