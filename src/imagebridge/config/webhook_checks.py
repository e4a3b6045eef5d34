"""Checks of ``[server.webhooks]``: its bounds and each declared endpoint.

The address rules (private, loopback, link-local targets) need DNS and are the webhook
service's: it applies them when the server starts, naming the same fields.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from imagebridge.config._net import ENV_NAME_RULE, is_env_name
from imagebridge.config.model import BridgeConfig
from imagebridge.config.store_checks import Report, check_store_location
from imagebridge.contract.webhooks import ALL_EVENT_TYPES

__all__ = ["check_webhooks"]

_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_MAX_TIMEOUT_MS = 300_000
_MAX_URL_BYTES = 2048
_POSITIVE = (
    "timeout_ms",
    "retry_period_secs",
    "retry_initial_ms",
    "retry_max_interval_ms",
    "lease_secs",
    "max_concurrent",
    "poll_interval_ms",
    "max_payload_bytes",
    "max_pending",
    "max_endpoints",
    "max_response_bytes",
    "retention_secs",
    "max_retained",
)


def _url_problem(url: str) -> str | None:
    if len(url.encode()) > _MAX_URL_BYTES:
        return f"URL must be at most {_MAX_URL_BYTES} bytes"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a bad port
    except ValueError:
        return "must be an http(s) URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL with a host"
    if parts.username is not None or parts.password is not None:
        return "must not contain credentials"
    return None


def check_webhooks(config: BridgeConfig, report: Report) -> None:
    hooks = config.server.webhooks
    base = "server.webhooks"
    for name in _POSITIVE:
        if getattr(hooks, name) == 0:
            report(f"{base}.{name}", "out_of_range", "limit must be greater than zero")
    if hooks.timeout_ms > _MAX_TIMEOUT_MS:
        report(f"{base}.timeout_ms", "out_of_range", "an attempt may last at most 300000 ms")
    if hooks.lease_secs * 1000 <= hooks.timeout_ms:
        report(f"{base}.lease_secs", "out_of_range", "must be longer than timeout_ms")
    if hooks.retry_initial_ms > hooks.retry_max_interval_ms:
        report(f"{base}.retry_initial_ms", "out_of_range", "must not exceed retry_max_interval_ms")
    if not hooks.allowed_ports or 0 in hooks.allowed_ports:
        report(f"{base}.allowed_ports", "invalid", "must list ports between 1 and 65535")
    if len(hooks.endpoints) > hooks.max_endpoints:
        report(f"{base}.endpoints", "out_of_range", "more endpoints than max_endpoints")
    for name, endpoint in hooks.endpoints.items():
        field = f"{base}.endpoints.{name}"
        if not _NAME.fullmatch(name):
            report(field, "invalid", "name must be 1 to 64 letters, digits, '.', '_' or '-'")
        problem = _url_problem(endpoint.url)
        if problem is not None:
            report(f"{field}.url", "invalid", problem)
        if not is_env_name(endpoint.secret_env):
            report(f"{field}.secret_env", "invalid", ENV_NAME_RULE)
        if not endpoint.events:
            report(f"{field}.events", "invalid", "must name at least one event type")
        for index, kind in enumerate(endpoint.events):
            if kind not in ALL_EVENT_TYPES:
                report(f"{field}.events.{index}", "invalid", "unknown webhook event type")
        if endpoint.key is not None and not config.server.keys.enabled:
            report(f"{field}.key", "invalid", "a key's endpoint needs server.keys.enabled")
    if hooks.enabled and not config.server.jobs.enabled:  # opened for the outbox alone
        check_store_location("server.jobs.database", config.server.jobs.database, report)
