"""Every default of the SDK in one place (timeouts, retries, size bounds, environment)."""

from __future__ import annotations

import httpx

__all__ = [
    "BASE_URL_ENV",
    "DEADLINE_MARGIN",
    "DEFAULT_BASE_URL",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_INITIAL_RETRY_DELAY",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_AFTER",
    "DEFAULT_MAX_RETRY_DELAY",
    "DEFAULT_MAX_STREAM_BYTES",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "IDEMPOTENCY_HEADER",
    "MAX_PAGES",
    "REQUEST_ID_HEADER",
    "TOKEN_ENV",
    "USER_AGENT",
]

BASE_URL_ENV = "IMAGEGEN_BRIDGE_URL"
TOKEN_ENV = "IMAGEGEN_BRIDGE_TOKEN"  # noqa: S105 - the variable's name, not a secret
DEFAULT_BASE_URL = "http://127.0.0.1:8787"

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 600.0
"""Generations take minutes; the bridge sends nothing on ``/v1/images`` until it is done."""
DEFAULT_TIMEOUT = httpx.Timeout(DEFAULT_READ_TIMEOUT, connect=DEFAULT_CONNECT_TIMEOUT)
DEADLINE_MARGIN = 30.0
"""Seconds added to a request's ``timeout_ms`` so the bridge's own deadline answers first."""

DEFAULT_MAX_RETRIES = 2
DEFAULT_INITIAL_RETRY_DELAY = 0.5
DEFAULT_MAX_RETRY_DELAY = 8.0
DEFAULT_MAX_RETRY_AFTER = 120.0
"""A ``Retry-After`` longer than this is reported to the caller instead of slept through."""

DEFAULT_MAX_RESPONSE_BYTES = 512 * 1024 * 1024
"""One JSON body, artifact or SSE event. The bridge's own payload budget is 256 MiB of
image bytes, which base64 turns into about 342 MiB of JSON."""
DEFAULT_MAX_STREAM_BYTES = 1024 * 1024 * 1024
"""All bytes of one event stream (partial previews plus the final response)."""

MAX_PAGES = 10_000
"""Upper bound on pages an ``iter()`` helper follows before it reports a loop."""

IDEMPOTENCY_HEADER = "Idempotency-Key"
REQUEST_ID_HEADER = "x-request-id"
USER_AGENT = "imagebridge-python-sdk"
