"""SSRF-resistant fetching of remote images (input URLs and provider output URLs).

Each hop — the first request and every redirect — is validated on its own: scheme,
no credentials, host allow-list, port allow-list, then DNS. If *any* address a name
resolves to is not public, the hop is refused (unless private networks are explicitly
allowed). The request is then sent to exactly one of those checked addresses (the URL
is rewritten to the IP; ``Host`` and TLS SNI/verification keep the original name), so
a second DNS answer cannot redirect the connection (DNS rebinding). No proxy, no
automatic redirects, no content decoding, a running byte cap and a deadline per hop.

Errors are ``BridgeError(code=input)`` and never contain the URL (it may carry tokens).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from imagebridge._version import __version__
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.inputs import LoadedImage
from imagebridge.imaging.inspect import ImageLimits, inspect_image

__all__ = [
    "DEFAULT_MAX_BYTES",
    "IPAddress",
    "RemoteFetchPolicy",
    "RemoteImageFetcher",
    "Resolver",
    "is_public_address",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: ``(host, port) -> IP address strings``; the default asks the OS off the event loop.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

DEFAULT_MAX_BYTES = 32 * 1024 * 1024
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_ALLOWED_CONTENT_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/webp", "application/octet-stream"}
)
_ACCEPT = "image/png,image/jpeg,image/webp;q=0.9"
_MAX_ADDRESSES_TRIED = 8

_BLOCKED_V4 = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # "this network", includes unspecified
        "10.0.0.0/8",
        "100.64.0.0/10",  # CGNAT
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local (cloud metadata)
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, includes broadcast
    )
)
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_BLOCKED_V6 = tuple(
    ipaddress.IPv6Network(net)
    for net in (
        "2001:2::/48",  # benchmarking
        "2001:10::/28",  # ORCHID
        "2001:20::/28",  # ORCHIDv2
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation (RFC 9637)
    )
)
_MAPPED_V6 = ipaddress.IPv6Network("::ffff:0:0/96")
_NAT64_V6 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")


_HOSTNAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _public_v4(address: ipaddress.IPv4Address) -> bool:
    return not any(address in network for network in _BLOCKED_V4)


def is_public_address(address: IPAddress) -> bool:
    """Whether ``address`` is a publicly routable unicast address.

    IPv6 is judged by an allow-list (global unicast ``2000::/3`` only) minus special
    blocks; addresses that embed an IPv4 address (mapped, NAT64, 6to4, Teredo) are
    public only if every embedded IPv4 address is. IPv4-compatible ``::a.b.c.d`` and
    site-local ``fec0::/10`` fall outside ``2000::/3`` and are refused.
    """
    if isinstance(address, ipaddress.IPv4Address):
        return _public_v4(address)
    address = ipaddress.IPv6Address(address.packed)  # drop any scope id
    if address in _MAPPED_V6:
        return _public_v4(ipaddress.IPv4Address(address.packed[12:]))
    if address in _NAT64_V6:
        return _public_v4(ipaddress.IPv4Address(address.packed[12:]))
    if address not in _GLOBAL_UNICAST_V6 or any(address in net for net in _BLOCKED_V6):
        return False
    if address in _SIX_TO_FOUR:
        return _public_v4(ipaddress.IPv4Address(address.packed[2:6]))
    if address in _TEREDO:
        server = ipaddress.IPv4Address(address.packed[4:8])
        client = ipaddress.IPv4Address(bytes(b ^ 0xFF for b in address.packed[12:16]))
        return _public_v4(server) and _public_v4(client)
    return True


@dataclass(frozen=True, slots=True)
class RemoteFetchPolicy:
    """``inputs.remote`` / ``artifacts.remote_output``: off unless explicitly enabled."""

    enabled: bool = False
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    allowed_ports: frozenset[int] = frozenset({80, 443})
    allow_private_networks: bool = False
    max_redirects: int = 3
    timeout_ms: int = 20_000
    max_url_bytes: int = 8 * 1024
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        object.__setattr__(self, "allowed_hosts", frozenset(h.lower() for h in self.allowed_hosts))
        object.__setattr__(self, "allowed_ports", frozenset(self.allowed_ports))
        problems = []
        if self.enabled and not self.allowed_ports:
            problems.append("allowed_ports must not be empty")
        if any(not 0 < port < 65536 for port in self.allowed_ports):
            problems.append("allowed_ports must be between 1 and 65535")
        if not 0 <= self.max_redirects <= 10:
            problems.append("max_redirects must be between 0 and 10")
        for name in ("timeout_ms", "max_url_bytes", "max_bytes"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be greater than zero")
        if problems:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "remote fetch policy is invalid: " + "; ".join(problems),
            )


def _remote_error(message: str, **details: Any) -> BridgeError:
    return BridgeError(ErrorCode.INPUT, message, details=details or None)


async def _system_resolver(host: str, port: int) -> Sequence[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True, slots=True)
class _Hop:
    url: httpx.URL
    host: str
    port: int
    addresses: tuple[IPAddress, ...]


class RemoteImageFetcher:
    """Fetch one HTTP(S) image under a :class:`RemoteFetchPolicy` and verify it."""

    def __init__(
        self,
        policy: RemoteFetchPolicy,
        limits: ImageLimits | None = None,
        *,
        resolver: Resolver | None = None,
        user_agent: str = f"imagegen-bridge/{__version__}",
    ) -> None:
        self._policy = policy
        self._limits = limits or ImageLimits()
        self._resolver = resolver or _system_resolver
        self._user_agent = user_agent

    @property
    def policy(self) -> RemoteFetchPolicy:
        return self._policy

    @property
    def enabled(self) -> bool:
        return self._policy.enabled

    async def fetch(self, url: str) -> LoadedImage:
        """Download and fully verify the image at ``url``, following checked redirects."""
        policy = self._policy
        if not policy.enabled:
            raise _remote_error("remote image inputs are disabled")
        if not isinstance(url, str) or len(url.encode("utf-8", "replace")) > policy.max_url_bytes:
            raise _remote_error(
                "remote image URL exceeds the configured limit", max_url_bytes=policy.max_url_bytes
            )
        try:
            current = httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            raise _remote_error("remote image URL is invalid") from exc
        for hop in range(policy.max_redirects + 1):
            try:
                async with asyncio.timeout(policy.timeout_ms / 1000):
                    outcome = await self._hop(current, hop)
            except TimeoutError as exc:
                raise _remote_error(
                    "remote image request timed out", timeout_ms=policy.timeout_ms
                ) from exc
            if isinstance(outcome, httpx.URL):
                current = outcome
                continue
            info = await asyncio.to_thread(inspect_image, outcome, self._limits)
            return LoadedImage(data=outcome, info=info)
        raise _remote_error(
            "remote image redirect limit exceeded", max_redirects=policy.max_redirects
        )

    # -- one hop -----------------------------------------------------------------------------

    def _address_permitted(self, address: IPAddress, hop: int) -> bool:
        """Policy for one resolved address (``hop`` 0 is the first request)."""
        return self._policy.allow_private_networks or is_public_address(address)

    async def _validate(self, url: httpx.URL, hop: int) -> _Hop:
        policy = self._policy
        if url.scheme not in ("http", "https"):
            raise _remote_error("remote image URL must use http or https")
        if url.userinfo:
            raise _remote_error("remote image URL must not contain credentials")
        host = url.raw_host.decode("ascii").lower().rstrip(".")
        if not host:
            raise _remote_error("remote image URL has no hostname")
        if not _HOSTNAME.fullmatch(host) and not _is_ip_literal(host):
            raise _remote_error("remote image URL is invalid")
        names = {host, url.host.lower().rstrip(".")}
        if policy.allowed_hosts and not names & policy.allowed_hosts:
            raise _remote_error("remote image hostname is not allowed")
        port = url.port or (443 if url.scheme == "https" else 80)
        if port not in policy.allowed_ports:
            raise _remote_error("remote image port is not allowed", port=port)
        try:
            resolved = await self._resolver(host, port)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a pluggable resolver: any failure means "unresolvable"
            raise _remote_error("remote image hostname could not be resolved") from exc
        addresses: list[IPAddress] = []
        for text in resolved:
            try:
                addresses.append(ipaddress.ip_address(text.split("%", 1)[0]))
            except ValueError as exc:
                raise _remote_error("remote image hostname resolved to an invalid address") from exc
        if not addresses:
            raise _remote_error("remote image hostname resolved to no addresses")
        if not all(self._address_permitted(address, hop) for address in addresses):
            raise _remote_error("remote image hostname resolves to a private or reserved address")
        return _Hop(url, host, port, tuple(dict.fromkeys(addresses)))

    async def _hop(self, url: httpx.URL, hop: int) -> bytes | httpx.URL:
        """Bytes of the final response, or the next URL to visit."""
        checked = await self._validate(url, hop)
        last_error: Exception | None = None
        for address in checked.addresses[:_MAX_ADDRESSES_TRIED]:
            try:
                return await self._request(checked, address)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last_error = exc  # nothing was sent to this address: try the next one
        raise _remote_error("remote image request failed") from last_error

    def _headers(self, checked: _Hop) -> dict[str, str]:
        host = checked.url.raw_host.decode("ascii")
        if ":" in host:
            host = f"[{host}]"
        if checked.url.port is not None:
            host = f"{host}:{checked.url.port}"
        return {
            "Host": host,
            "User-Agent": self._user_agent,
            "Accept": _ACCEPT,
            "Accept-Encoding": "identity",
        }

    async def _request(self, checked: _Hop, address: IPAddress) -> bytes | httpx.URL:
        pinned = checked.url.copy_with(host=str(address))
        extensions: dict[str, Any] = {}
        if checked.url.scheme == "https":
            extensions["sni_hostname"] = checked.host
        timeout = httpx.Timeout(self._policy.timeout_ms / 1000)
        async with httpx.AsyncClient(
            trust_env=False, follow_redirects=False, timeout=timeout
        ) as client:
            request = client.build_request(
                "GET", pinned, headers=self._headers(checked), extensions=extensions
            )
            try:
                response = await client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                raise
            except httpx.HTTPError as exc:
                raise _remote_error("remote image request failed") from exc
            try:
                return await self._consume(checked, response)
            finally:
                await response.aclose()

    async def _consume(self, checked: _Hop, response: httpx.Response) -> bytes | httpx.URL:
        status = response.status_code
        if status in _REDIRECT_STATUSES:
            location = response.headers.get("location")
            if not location:
                raise _remote_error("redirect response has no location")
            try:
                return checked.url.join(location)
            except (httpx.InvalidURL, ValueError) as exc:
                raise _remote_error("redirect location is invalid") from exc
        if not 200 <= status < 300:
            raise _remote_error(f"remote image returned HTTP {status}", status=status)
        cap = min(self._policy.max_bytes, self._limits.max_encoded_bytes)
        length = response.headers.get("content-length")
        if length is not None and (not length.strip().isdigit() or int(length) > cap):
            raise _remote_error(
                "remote image content length exceeds the configured limit", maximum_bytes=cap
            )
        content_type = response.headers.get("content-type")
        if content_type is not None:
            media = content_type.split(";", 1)[0].strip().lower()
            if media not in _ALLOWED_CONTENT_TYPES:
                raise _remote_error(
                    "remote response does not declare a supported image content type"
                )
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise _remote_error("remote image uses an unsupported content encoding")
        return await _read_capped(response.aiter_raw(), cap)


async def _read_capped(chunks: AsyncIterator[bytes], cap: int) -> bytes:
    received: list[bytes] = []
    total = 0
    try:
        async for chunk in chunks:
            total += len(chunk)
            if total > cap:
                raise _remote_error(
                    "remote image exceeds the configured byte limit", maximum_bytes=cap
                )
            received.append(chunk)
    except httpx.HTTPError as exc:
        raise _remote_error("remote image body failed") from exc
    return b"".join(received)
