"""Standard Webhooks signatures, as OpenAI signs its webhooks.

Each attempt carries ``webhook-id`` (the delivery's id, the same on every attempt),
``webhook-timestamp`` (Unix seconds of this attempt) and ``webhook-signature``: ``v1,`` and
the base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}`` under the secret's bytes. Secrets
are ``whsec_`` plus base64 of 32 random bytes; the key is the decoded bytes. During a
rotation's overlap two signatures are sent, space-separated, and a receiver accepts either
(``openai.OpenAI(webhook_secret=…).webhooks.unwrap`` and every Standard Webhooks library
verify this unchanged).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets as random
from collections.abc import Sequence

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "SECRET_PREFIX",
    "check_secret",
    "new_secret",
    "secret_hint",
    "sign",
    "signed_headers",
]

SECRET_PREFIX = "whsec_"  # noqa: S105 - the secrets' prefix, not a secret
_SECRET_BYTES = 32
_MIN_SECRET_BYTES = 16
_MAX_SECRET_BYTES = 128


def new_secret() -> str:
    """A fresh signing secret (shown once, when an endpoint is made or rotated)."""
    return SECRET_PREFIX + base64.b64encode(random.token_bytes(_SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    return base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)


def check_secret(secret: str, field: str) -> str:
    """A ``whsec_`` secret of 16 to 128 random bytes (as the SDKs decode it)."""
    problem = f"{field} must hold a whsec_ secret (whsec_ and base64 of 16 to 128 bytes)"
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise BridgeError(ErrorCode.CONFIGURATION, problem, details={"field": field})
    try:
        key = _key(secret)
    except (binascii.Error, ValueError):
        raise BridgeError(ErrorCode.CONFIGURATION, problem, details={"field": field}) from None
    if not _MIN_SECRET_BYTES <= len(key) <= _MAX_SECRET_BYTES:
        raise BridgeError(ErrorCode.CONFIGURATION, problem, details={"field": field})
    return secret


def secret_hint(secret: str) -> str:
    """What listings show of a secret: its prefix and last four characters."""
    return f"{SECRET_PREFIX}…{secret[-4:]}"


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``."""
    mac = hmac.new(_key(secret), f"{message_id}.{timestamp}.".encode(), hashlib.sha256)
    mac.update(body)
    return "v1," + base64.b64encode(mac.digest()).decode()


def signed_headers(
    message_id: str, timestamp: int, body: bytes, secrets: Sequence[str]
) -> dict[str, str]:
    """The three Standard Webhooks headers, one signature per secret."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(sign(s, message_id, timestamp, body) for s in secrets),
    }
