"""Checked reading of backend payloads: JSON bodies, numbers, images, revised prompts."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.wire._constants import MAX_BASE64_CHARS


def parse_json_body(body: bytes, *, what: str = "response") -> Any:
    """Decode a JSON body or raise ``protocol`` (the body never reaches the message)."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise BridgeError(
            ErrorCode.PROTOCOL, f"The Codex backend sent a {what} that is not valid JSON."
        ) from None


def _revised_prompt(item: Mapping[str, Any], max_bytes: int) -> str | None:
    value = item.get("revised_prompt", item.get("revisedPrompt"))
    if not isinstance(value, str) or not value:
        return None
    if len(value) > max_bytes or len(value.encode("utf-8", "replace")) > max_bytes:
        return None
    return value


def _too_large_image(limit: int) -> BridgeError:
    return BridgeError(
        ErrorCode.PROTOCOL,
        f"The Codex backend sent an image larger than {limit} base64 characters.",
        details={"limit": "max_base64_chars", "max_base64_chars": limit},
    )


def decode_image_base64(b64: str, *, max_chars: int = MAX_BASE64_CHARS) -> bytes:
    """Strict standard-alphabet base64 (surrounding whitespace trimmed) → bytes, or ``protocol``."""
    text = b64.strip()
    if len(text) > max_chars:
        raise _too_large_image(max_chars)
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BridgeError(
            ErrorCode.PROTOCOL, "The Codex backend sent an image that is not valid base64."
        ) from None
    if not data:
        raise BridgeError(ErrorCode.PROTOCOL, "The Codex backend sent an empty image.")
    return data


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None
