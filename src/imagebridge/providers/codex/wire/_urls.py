"""Backend URLs: where a bearer token may be sent, and the routes next to an endpoint."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.wire._constants import (
    _LOOPBACK_HOSTS,
    DEFAULT_RESPONSES_ENDPOINT,
)


@dataclass(frozen=True, slots=True)
class CodexBackendUrls:
    """Every route the bridge uses on one Codex backend."""

    responses: str
    images_generations: str
    images_edits: str
    usage: str


def check_backend_url(url: str, *, field: str = "endpoint") -> str:
    """Return ``url`` if it may carry a bearer token: https, or http on a loopback host.

    User info and fragments are refused (a token must never go to a place the user did
    not mean); anything else is a ``configuration`` error naming ``field``.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise _url_error(field, "is not a valid URL") from None
    if parts.scheme not in {"https", "http"} or not host:
        raise _url_error(field, "must be an absolute https URL")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise _url_error(field, "must not contain credentials or a fragment")
    if parts.scheme == "http" and not _is_loopback(host):
        raise _url_error(field, "must use https unless the host is loopback")
    return url


def derive_usage_url(responses_endpoint: str) -> str:
    """``…/backend-api/codex/responses`` → ``…/backend-api/wham/usage`` (same rule as config)."""
    parts = urlsplit(responses_endpoint)
    path = parts.path.rstrip("/")
    for suffix in ("/codex/responses", "/responses"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return urlunsplit((parts.scheme, parts.netloc, f"{path}/wham/usage", "", ""))


def backend_urls(
    responses_endpoint: str = DEFAULT_RESPONSES_ENDPOINT, *, usage_url: str | None = None
) -> CodexBackendUrls:
    """All routes next to a Responses endpoint; ``usage_url`` overrides the derived one."""
    check_backend_url(responses_endpoint, field="endpoint")
    parts = urlsplit(responses_endpoint)
    path = parts.path.rstrip("/")
    codex_root = path[: -len("/responses")] if path.endswith("/responses") else path
    images = urlunsplit((parts.scheme, parts.netloc, f"{codex_root}/images", "", ""))
    usage = usage_url if usage_url is not None else derive_usage_url(responses_endpoint)
    check_backend_url(usage, field="usage_endpoint")
    return CodexBackendUrls(
        responses=responses_endpoint,
        images_generations=f"{images}/generations",
        images_edits=f"{images}/edits",
        usage=usage,
    )


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_error(field: str, problem: str) -> BridgeError:
    return BridgeError(
        ErrorCode.CONFIGURATION, f"The Codex {field} URL {problem}.", details={"field": field}
    )
