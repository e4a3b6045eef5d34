"""Who may call a protected route, and whose resources the call acts on.

Two checks, in order: the browser-origin guard (a web page on another origin must not be
able to drive a bridge listening on loopback, even without a bearer) and, when the
server is configured with a bearer token, the exact ``Authorization: Bearer <token>``
header compared in constant time. The result is the caller's ownership scope:
``anonymous-local`` without a token, ``bearer:<sha256 hex of the token>`` with one.

With named API keys (``server.keys.enabled``, docs/keys.md) the bearer token is the admin
key and every other caller needs a key: looked up by the hash of the presented secret on
every request (no cache, so a revocation holds at once on every instance), owning the
scope ``key:<key id>``. Failed authentications are counted per client address; past
``server.keys.auth_failure_limit`` in a window, that address is refused (429) until the
window ends, before any secret is checked. Secrets never reach a log or an error.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.keys import KeyService, key_scope
from imagebridge.storage.records import KeyRecord

__all__ = [
    "ANONYMOUS_SCOPE",
    "AccessPolicy",
    "FailureThrottle",
    "Principal",
    "check_browser_origin",
    "quota_headers",
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
class Principal:
    """Who is calling: an ownership scope, whether it is the admin, and its key if any."""

    owner: str
    admin: bool
    key: KeyRecord | None = None


@dataclass
class FailureThrottle:
    """Failed authentications per client address in fixed windows, bounded in memory."""

    limit: int
    window_s: float
    max_clients: int
    clock: Callable[[], float] = time.monotonic
    _seen: OrderedDict[str, tuple[float, int]] = field(default_factory=OrderedDict)

    def check(self, client: str) -> None:
        """Refuse an address past its limit (429 until its window ends)."""
        entry = self._seen.get(client)
        now = self.clock()
        if entry is None or now - entry[0] >= self.window_s or entry[1] < self.limit:
            return
        retry_ms = max(1, int((entry[0] + self.window_s - now) * 1000))
        raise BridgeError(
            ErrorCode.RATE_LIMITED,
            "too many failed authentications from this address",
            retryable=True,
            details={"reason": "authentication_failures", "retry_after_ms": retry_ms},
        )

    def failed(self, client: str) -> None:
        now = self.clock()
        entry = self._seen.pop(client, None)
        if entry is None or now - entry[0] >= self.window_s:
            entry = (now, 0)
        self._seen[client] = (entry[0], entry[1] + 1)
        while len(self._seen) > self.max_clients:
            self._seen.popitem(last=False)


def quota_headers(service: KeyService, record: KeyRecord) -> list[tuple[bytes, bytes]]:
    """``x-imagebridge-images-{limit,remaining,reset}-<window>`` for each limited window."""
    headers: list[tuple[bytes, bytes]] = []
    for window, reading in service.quota(record).items():
        headers += [
            (f"x-imagebridge-images-limit-{window}".encode(), str(reading.limit).encode()),
            (f"x-imagebridge-images-remaining-{window}".encode(), str(reading.remaining).encode()),
            (f"x-imagebridge-images-reset-{window}".encode(), str(reading.reset_at).encode()),
        ]
    return headers


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """The server's bearer (if any), the ownership scope it grants, and the API keys."""

    expected: bytes | None
    """``b"Bearer " + token`` — the whole header value a caller must send."""
    owner: str
    keys: KeyService | None = None
    throttle: FailureThrottle | None = None

    @classmethod
    def open(cls) -> AccessPolicy:
        return cls(None, ANONYMOUS_SCOPE)

    @classmethod
    def with_token(cls, token: str) -> AccessPolicy:
        raw = token.encode()
        return cls(_BEARER_PREFIX + raw, f"bearer:{hashlib.sha256(raw).hexdigest()}")

    @property
    def authentication_required(self) -> bool:
        return self.expected is not None or self.keys is not None

    def authorize(self, headers: Sequence[tuple[bytes, bytes]]) -> str:
        """Both checks without keys; return the caller's ownership scope or raise."""
        check_browser_origin(headers)
        if self.expected is None:
            if self.keys is not None:
                raise BridgeError(ErrorCode.AUTHENTICATION, "bridge authentication required")
            return self.owner
        values = _values(headers, b"authorization")
        presented = values[0] if len(values) == 1 else b""
        if not hmac.compare_digest(presented, self.expected):
            raise BridgeError(ErrorCode.AUTHENTICATION, "bridge authentication required")
        return self.owner

    async def authenticate(
        self, headers: Sequence[tuple[bytes, bytes]], client: str | None
    ) -> Principal:
        """The caller: the admin (the bearer token, or everyone without auth) or a key."""
        if self.keys is None:
            return Principal(self.authorize(headers), admin=True)
        check_browser_origin(headers)
        address = client or "unknown"
        if self.throttle is not None:
            self.throttle.check(address)
        values = _values(headers, b"authorization")
        presented = values[0] if len(values) == 1 else b""
        if self.expected is not None and hmac.compare_digest(presented, self.expected):
            return Principal(self.owner, admin=True)
        record = None
        if presented.startswith(_BEARER_PREFIX):
            try:
                secret = presented[len(_BEARER_PREFIX) :].decode("ascii")
            except UnicodeDecodeError:
                secret = ""
            record = await self.keys.authenticate(secret)
        if record is None:
            if self.throttle is not None:
                self.throttle.failed(address)
            raise BridgeError(ErrorCode.AUTHENTICATION, "bridge authentication required")
        return Principal(key_scope(record.id), admin=False, key=record)
