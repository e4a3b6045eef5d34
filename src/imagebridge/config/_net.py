"""Socket-address, URL and name rules used by the semantic checks.

Every function here answers a yes/no question or returns ``None`` for bad input; none
of them raises, so :func:`imagebridge.config.validation.check` never raises either.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import SplitResult, urlsplit

__all__ = [
    "ENV_NAME_RULE",
    "NO_QUERY_RULE",
    "UPSTREAM_URL_RULE",
    "is_env_name",
    "is_loopback_host",
    "is_provider_name",
    "parse_socket_address",
    "valid_public_base_url",
    "valid_service_endpoint",
    "valid_upstream_url",
]

_PROVIDER_NAME = re.compile(r"[a-z][a-z0-9-]{0,63}")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,127}")
_LOOPBACK_NAMES = frozenset({"localhost"})

UPSTREAM_URL_RULE = "URL must be https (or http to a loopback host) without credentials or fragment"
"""The message for a value :func:`valid_upstream_url` refuses."""
NO_QUERY_RULE = "the API root must not carry a query: routes are appended to its path"
ENV_NAME_RULE = "must be an environment variable name matching [A-Z][A-Z0-9_]{0,127}"
"""The message for a value :func:`is_env_name` refuses."""


def is_provider_name(value: str) -> bool:
    """1–64 bytes, starts with ``a-z``, then only ``a-z``, ``0-9`` and ``-``."""
    return _PROVIDER_NAME.fullmatch(value) is not None


def is_env_name(value: str) -> bool:
    """An environment variable *name* as the config accepts it: ``[A-Z][A-Z0-9_]{0,127}``."""
    return _ENV_NAME.fullmatch(value) is not None


def parse_socket_address(value: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """``127.0.0.1:8787`` or ``[::1]:8787`` → (address, port); ``ValueError`` otherwise.

    Host names are refused, as in the original: the bind must be numeric.
    """
    if value.startswith("["):
        host, sep, port_text = value[1:].partition("]:")
        if not sep:
            raise ValueError("bad socket address")
        address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv6Address(host)
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep:
            raise ValueError("bad socket address")
        address = ipaddress.IPv4Address(host)
    if not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
        raise ValueError("bad port")
    port = int(port_text)
    if port > 65_535:
        raise ValueError("bad port")
    return address, port


def is_loopback_host(host: str | None) -> bool:
    """``localhost`` or a loopback IP literal (brackets already removed by urlsplit)."""
    if host is None:
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(value: str) -> SplitResult | None:
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises ValueError for a malformed port
    except ValueError:
        return None
    if not parts.hostname or any(ch.isspace() or ord(ch) < 0x20 for ch in value):
        return None
    return parts


def valid_upstream_url(value: str) -> bool:
    """https, or http to a loopback host; no credentials and no fragment."""
    parts = _split(value)
    if parts is None:
        return False
    scheme_ok = parts.scheme == "https" or (
        parts.scheme == "http" and is_loopback_host(parts.hostname)
    )
    return (
        scheme_ok
        and parts.username is None
        and parts.password is None
        and not parts.fragment
        and "#" not in value
    )


def valid_public_base_url(value: str) -> bool:
    """Credential-free http(s) with no query or fragment, path ending in ``/``."""
    parts = _split(value)
    if parts is None:
        return False
    return (
        parts.scheme in {"http", "https"}
        and parts.username is None
        and parts.password is None
        and not parts.query
        and "?" not in value
        and "#" not in value
        and (parts.path or "/").endswith("/")
    )


def valid_service_endpoint(value: str) -> bool:
    """A service's address inside a deployment (an S3 gateway, an OTLP collector): http or
    https to any host (such services often listen in plain HTTP inside a cluster), no
    credentials (they go in headers or named variables), no query or fragment."""
    parts = _split(value)
    if parts is None:
        return False
    return (
        parts.scheme in {"http", "https"}
        and parts.username is None
        and parts.password is None
        and not parts.query
        and not parts.fragment
        and "?" not in value
        and "#" not in value
    )
