"""Where a webhook may go: the remote-input address rules, applied to receivers.

A target URL is ``http`` or ``https``, without credentials, on an allowed port. Its host
must resolve only to public addresses (:func:`~imagebridge.artifacts.inputs.remote.
is_public_address`: loopback, private, link-local, CGNAT, documentation and other reserved
ranges are refused, including IPv6 forms embedding them) unless private networks are allowed
by configuration. The rules run when an endpoint is configured or created (so a mistake is
answered at once) and again before every attempt, whose request then goes to one checked
address (the URL rewritten to it, ``Host`` and TLS SNI keeping the name): a name that later
resolves elsewhere (DNS rebinding) is refused, not followed.

Refusals are ``invalid_request`` naming the field, with a stable ``details.reason``:
``webhook_target_invalid``, ``webhook_target_port``, ``webhook_target_private``,
``webhook_target_unresolvable``. The URL itself (it may hold a token) is never in an error.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx

from imagebridge.artifacts.inputs.remote import IPAddress, is_public_address
from imagebridge.contract.errors import BridgeError
from imagebridge.storage.rules.webhooks import MAX_URL_BYTES

__all__ = [
    "INVALID",
    "PORT",
    "PRIVATE",
    "UNRESOLVABLE",
    "Resolver",
    "Target",
    "TargetPolicy",
    "parse_target",
    "resolve_target",
    "system_resolver",
]

INVALID = "webhook_target_invalid"
PORT = "webhook_target_port"
PRIVATE = "webhook_target_private"
UNRESOLVABLE = "webhook_target_unresolvable"

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> IP address strings``."""

_HOSTNAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The OS resolver, off the event loop."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """``server.webhooks``' address rules (the remote-input rules' defaults)."""

    allow_private_networks: bool = False
    allowed_ports: frozenset[int] = frozenset({80, 443})


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL; after :func:`resolve_target`, also the addresses it may go to."""

    url: httpx.URL
    host: str
    port: int
    addresses: tuple[IPAddress, ...] = field(default=())


def _refused(reason: str, message: str, field_name: str) -> BridgeError:
    return BridgeError.invalid_request(message, field=field_name, reason=reason)


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def parse_target(url: object, policy: TargetPolicy, field_name: str = "url") -> Target:
    """The shape rules, and the address rules for an IP-literal host (no DNS here)."""
    if not isinstance(url, str) or not 0 < len(url.encode("utf-8", "replace")) <= MAX_URL_BYTES:
        raise _refused(INVALID, f"webhook url must be 1 to {MAX_URL_BYTES} bytes", field_name)
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise _refused(INVALID, "webhook url is invalid", field_name) from None
    if parsed.scheme not in ("http", "https"):
        raise _refused(INVALID, "webhook url must use http or https", field_name)
    if parsed.userinfo:
        raise _refused(INVALID, "webhook url must not contain credentials", field_name)
    host = parsed.raw_host.decode("ascii", "replace").lower().rstrip(".")
    literal = _literal(host)
    if not host or (literal is None and not _HOSTNAME.fullmatch(host)):
        raise _refused(INVALID, "webhook url has no valid hostname", field_name)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    if port not in policy.allowed_ports:
        raise BridgeError.invalid_request(
            "webhook url port is not allowed (server.webhooks.allowed_ports)",
            field=field_name,
            reason=PORT,
            port=port,
        )
    target = Target(parsed, host, port)
    if literal is not None:
        _check_addresses(target, (literal,), policy, field_name)
        return Target(parsed, host, port, (literal,))
    return target


def _check_addresses(
    target: Target, addresses: Sequence[IPAddress], policy: TargetPolicy, field_name: str
) -> None:
    if not policy.allow_private_networks and not all(map(is_public_address, addresses)):
        raise _refused(
            PRIVATE,
            "webhook url resolves to a private or reserved address "
            "(server.webhooks.allow_private_networks)",
            field_name,
        )


async def resolve_target(
    target: Target, policy: TargetPolicy, resolver: Resolver, field_name: str = "url"
) -> Target:
    """``target`` with the addresses it may go to: every address its host resolves to must
    pass the rules, or none is used."""
    if target.addresses:
        return target
    try:
        answers = await resolver(target.host, target.port)
    except asyncio.CancelledError:
        raise
    except Exception:  # a pluggable resolver: any failure means "unresolvable"
        raise _refused(UNRESOLVABLE, "webhook url host could not be resolved", field_name) from None
    addresses: list[IPAddress] = []
    for text in answers:
        address = _literal(text.split("%", 1)[0])
        if address is None:
            raise _refused(
                UNRESOLVABLE, "webhook url host resolved to an invalid address", field_name
            )
        addresses.append(address)
    if not addresses:
        raise _refused(UNRESOLVABLE, "webhook url host resolved to no address", field_name)
    _check_addresses(target, addresses, policy, field_name)
    return Target(target.url, target.host, target.port, tuple(dict.fromkeys(addresses)))
