"""Who may call a protected route, and whose resources the call acts on.

Two checks, in order: the browser-origin guard (a web page on another origin must not be
able to drive a bridge listening on loopback, even without a bearer) and, when the
server is configured with a bearer token, the exact ``Authorization: Bearer <token>``
header compared in constant time. The result is the caller's ownership scope:
``anonymous-local`` without a token, ``bearer:<sha256 hex of the token>`` with one.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "ANONYMOUS_SCOPE",
    "AccessPolicy",
    "check_browser_origin",
    "read_bearer_token",
]

ANONYMOUS_SCOPE = "anonymous-local"
_BEARER_PREFIX = b"Bearer "
_SAME_SITE = {b"same-origin", b"none"}


def _cross_origin() -> BridgeError:
    return BridgeError(ErrorCode.PERMISSION_DENIED, "cross-origin browser requests are not allowed")


def _values(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [value for key, value in headers if key.lower() == name]


def _origin_matches_host(origin: bytes, host: bytes) -> bool:
    try:
        text = origin.decode("ascii")
        parts = urlsplit(text)
    except (UnicodeDecodeError, ValueError):
        return False
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    if parts.path not in ("", "/") or parts.query or parts.fragment or "?" in text:
        return False
    try:
        return parts.netloc.lower() == host.decode("ascii").lower()
    except UnicodeDecodeError:
        return False


def check_browser_origin(headers: Sequence[tuple[bytes, bytes]]) -> None:
    """Refuse requests a browser sends on behalf of another site; CLI and SDK calls pass."""
    fetch_site = _values(headers, b"sec-fetch-site")
    if len(fetch_site) > 1 or (fetch_site and fetch_site[0] not in _SAME_SITE):
        raise _cross_origin()
    origins = _values(headers, b"origin")
    if not origins:
        return
    if len(origins) > 1 or origins[0] == b"null":
        raise _cross_origin()
    hosts = _values(headers, b"host")
    if len(hosts) != 1 or not _origin_matches_host(origins[0], hosts[0]):
        raise _cross_origin()


def read_bearer_token(config: BridgeConfig, env: Mapping[str, str]) -> str | None:
    """The configured bearer token, or ``None`` when auth is off.

    A configured variable that is missing or empty is a configuration error: serving
    without the token the operator asked for would silently open the bridge.
    """
    name = config.server.bearer_token_env
    if name is None:
        return None
    token = env.get(name)
    if not token:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "the bearer token environment variable is missing or empty",
            details={"field": "server.bearer_token_env", "variable": name},
        )
    return token


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """The server's bearer (if any) and the ownership scope it grants."""

    expected: bytes | None
    """``b"Bearer " + token`` — the whole header value a caller must send."""
    owner: str

    @classmethod
    def open(cls) -> AccessPolicy:
        return cls(None, ANONYMOUS_SCOPE)

    @classmethod
    def with_token(cls, token: str) -> AccessPolicy:
        raw = token.encode()
        return cls(_BEARER_PREFIX + raw, f"bearer:{hashlib.sha256(raw).hexdigest()}")

    @property
    def authentication_required(self) -> bool:
        return self.expected is not None

    def authorize(self, headers: Sequence[tuple[bytes, bytes]]) -> str:
        """Run both checks; return the caller's ownership scope or raise."""
        check_browser_origin(headers)
        if self.expected is None:
            return self.owner
        values = _values(headers, b"authorization")
        presented = values[0] if len(values) == 1 else b""
        if not hmac.compare_digest(presented, self.expected):
            raise BridgeError(ErrorCode.AUTHENTICATION, "bridge authentication required")
        return self.owner
