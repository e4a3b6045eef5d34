"""Resolve the client's settings from arguments, then the environment, then defaults.

The bridge URL must be plain http(s) with a host and no credentials, query or fragment
(a path prefix, as behind a reverse proxy, is kept). The bearer token is never sent in
clear text beyond this machine: with a token, plain ``http`` is accepted only for a
loopback host unless the caller explicitly allows it.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import httpx

from imagebridge.client._constants import (
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_STREAM_BYTES,
    DEFAULT_TIMEOUT,
    TOKEN_ENV,
)
from imagebridge.client._exceptions import BridgeAPIError
from imagebridge.client._retry import RetryPolicy
from imagebridge.contract.errors import ErrorCode

__all__ = ["ClientSettings", "TimeoutTypes", "normalize_base_url", "resolve_settings", "to_timeout"]

TimeoutTypes = float | httpx.Timeout
_BASE_URL_SUGGESTION = "Pass base_url='http://127.0.0.1:8787' or set IMAGEGEN_BRIDGE_URL."


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Everything a client needs to reach one bridge (immutable once built)."""

    base_url: str
    token: str | None = field(repr=False)
    timeout: httpx.Timeout
    retry: RetryPolicy
    max_response_bytes: int
    max_stream_bytes: int
    default_headers: Mapping[str, str]


def _config_error(message: str, field_name: str, suggestion: str | None = None) -> BridgeAPIError:
    return BridgeAPIError(
        ErrorCode.CONFIGURATION,
        message,
        details={"field": field_name},
        suggestions=[suggestion] if suggestion else None,
    )


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_base_url(url: str, *, sends_token: bool, allow_insecure_token: bool = False) -> str:
    """Check a bridge URL and return it without a trailing slash."""
    try:
        parts = urlsplit(url.strip())
        _ = parts.port  # raises ValueError for a malformed port
    except ValueError:
        raise _config_error("bridge URL is malformed", "base_url", _BASE_URL_SUGGESTION) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _config_error(
            "bridge URL must be an http or https URL with a host", "base_url", _BASE_URL_SUGGESTION
        )
    if parts.username is not None or parts.password is not None:
        raise _config_error(
            "bridge URL must not contain credentials; pass token= or set IMAGEGEN_BRIDGE_TOKEN",
            "base_url",
        )
    if parts.query or parts.fragment:
        raise _config_error("bridge URL must not contain a query or fragment", "base_url")
    if (
        sends_token
        and parts.scheme == "http"
        and not _is_loopback(parts.hostname)
        and not allow_insecure_token
    ):
        raise _config_error(
            "refusing to send the bearer token over plain http to a non-loopback host",
            "base_url",
            "Use an https URL, or pass allow_insecure_token=True on a trusted network.",
        )
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _check_token(token: str) -> str:
    # The value is never echoed: only where the problem is.
    if not token.strip():
        raise _config_error("bearer token is blank", "token")
    if len(token) > 4096 or any(not "!" <= char <= "~" for char in token):
        raise _config_error("bearer token must be at most 4096 visible ASCII characters", "token")
    return token


def to_timeout(value: TimeoutTypes) -> httpx.Timeout:
    """A number is the read/write/pool timeout in seconds (connect stays short)."""
    if isinstance(value, httpx.Timeout):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise _config_error("timeout must be a positive number of seconds", "timeout")
    if not math.isfinite(value):
        raise _config_error("timeout must be finite; use httpx.Timeout(None) for none", "timeout")
    return httpx.Timeout(float(value), connect=min(float(value), DEFAULT_CONNECT_TIMEOUT))


def _positive_bytes(value: int, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _config_error(f"{field_name} must be a positive number of bytes", field_name)
    return value


def resolve_settings(
    *,
    base_url: str | None,
    token: str | None,
    timeout: TimeoutTypes | None,
    retry: RetryPolicy | None,
    max_retries: int | None,
    max_response_bytes: int | None,
    max_stream_bytes: int | None,
    default_headers: Mapping[str, str] | None,
    allow_insecure_token: bool,
    env: Mapping[str, str] | None,
) -> ClientSettings:
    """Arguments win over ``IMAGEGEN_BRIDGE_URL`` / ``IMAGEGEN_BRIDGE_TOKEN``, then defaults."""
    environ = os.environ if env is None else env
    if token is None:
        token = environ.get(TOKEN_ENV) or None
    if token is not None:
        token = _check_token(token)
    if base_url is None:
        base_url = environ.get(BASE_URL_ENV, "").strip() or DEFAULT_BASE_URL
    url = normalize_base_url(
        base_url, sends_token=token is not None, allow_insecure_token=allow_insecure_token
    )
    if retry is None:
        retry = RetryPolicy() if max_retries is None else RetryPolicy(max_retries=max_retries)
    elif max_retries is not None:
        raise _config_error("pass either retry= or max_retries=, not both", "max_retries")
    response_limit = _positive_bytes(
        DEFAULT_MAX_RESPONSE_BYTES if max_response_bytes is None else max_response_bytes,
        "max_response_bytes",
    )
    stream_limit = _positive_bytes(
        max(DEFAULT_MAX_STREAM_BYTES, response_limit)
        if max_stream_bytes is None
        else max_stream_bytes,
        "max_stream_bytes",
    )
    return ClientSettings(
        base_url=url,
        token=token,
        timeout=DEFAULT_TIMEOUT if timeout is None else to_timeout(timeout),
        retry=retry,
        max_response_bytes=response_limit,
        max_stream_bytes=stream_limit,
        default_headers=dict(default_headers or {}),
    )
