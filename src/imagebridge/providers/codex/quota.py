"""The ChatGPT plan's Codex usage windows, for ``doctor``, diagnostics and the dashboard.

Users hit 429s while the usage page shows quota left, or run a window dry without
warning; showing the windows answers both. Readings come from
``GET <backend>/wham/usage`` (it costs no quota) and from the ``x-codex-*`` headers every
generation answer carries. Only non-identifying fields are kept: never an account id or
an email. A failed reading is a :class:`BridgeError` from :meth:`CodexQuotaClient.get`
and an ``unavailable`` status from :meth:`CodexQuotaClient.status`, which never raises.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeAlias

import httpx

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import CredentialsLoader, load_codex_credentials_async
from imagebridge.providers.codex.http import read_limited
from imagebridge.providers.codex.wire import (
    MAX_ERROR_BODY_BYTES,
    ORIGINATOR,
    QuotaSnapshot,
    QuotaWindow,
    check_backend_url,
    classify_http_error,
    derive_usage_url,
    parse_json_body,
    parse_rate_limit_headers,
    parse_usage_payload,
    transport_error,
)

__all__ = [
    "DEFAULT_QUOTA_CACHE_MS",
    "CodexQuotaClient",
    "QuotaSnapshot",
    "QuotaStatus",
    "QuotaWindow",
    "derive_usage_url",
]

DEFAULT_QUOTA_CACHE_MS: Final = 30_000
DEFAULT_ERROR_CACHE_MS: Final = 5_000
DEFAULT_USAGE_TIMEOUT_S: Final = 10.0
MAX_USAGE_BODY_BYTES: Final = 1024 * 1024

HttpClientSource: TypeAlias = httpx.AsyncClient | Callable[[], httpx.AsyncClient]
"""A client, or a function returning the client to use now (one per event loop)."""


@dataclass(frozen=True, slots=True)
class QuotaStatus:
    """What diagnostics show: the latest snapshot, or why there is none."""

    state: Literal["available", "unavailable"]
    snapshot: QuotaSnapshot | None = None
    error_code: str | None = None
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.state}
        if self.snapshot is not None:
            body["quota"] = self.snapshot.to_dict()
        if self.error_code is not None:
            body["error"] = {"code": self.error_code, "message": self.message}
        return body


class CodexQuotaClient:
    """Reads ``wham/usage`` with a short cache; learns from generation headers in between.

    Concurrent :meth:`get` calls share one upstream request. A failure is remembered for
    ``error_cache_ms`` so a dashboard polling a broken backend does not hammer it.
    """

    def __init__(
        self,
        http_client: HttpClientSource,
        usage_url: str,
        cache_ms: int = DEFAULT_QUOTA_CACHE_MS,
        credentials_loader: CredentialsLoader = load_codex_credentials_async,
        *,
        error_cache_ms: int = DEFAULT_ERROR_CACHE_MS,
        timeout_s: float = DEFAULT_USAGE_TIMEOUT_S,
        max_body_bytes: int = MAX_USAGE_BODY_BYTES,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._http = http_client
        self._url = check_backend_url(usage_url, field="usage_endpoint")
        self._load_credentials = credentials_loader
        self._cache_s = max(cache_ms, 0) / 1000
        self._error_cache_s = max(error_cache_ms, 0) / 1000
        self._timeout_s = timeout_s
        self._max_body_bytes = max_body_bytes
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._lock = asyncio.Lock()
        self._snapshot: QuotaSnapshot | None = None
        self._fresh_until = float("-inf")
        self._error: BridgeError | None = None
        self._error_until = float("-inf")

    @classmethod
    def for_endpoint(
        cls,
        http_client: HttpClientSource,
        responses_endpoint: str,
        *,
        usage_url: str | None = None,
        cache_ms: int = DEFAULT_QUOTA_CACHE_MS,
        credentials_loader: CredentialsLoader = load_codex_credentials_async,
    ) -> CodexQuotaClient:
        """A client for the backend behind a Responses endpoint (``usage_url`` overrides)."""
        url = usage_url if usage_url is not None else derive_usage_url(responses_endpoint)
        return cls(http_client, url, cache_ms, credentials_loader)

    @property
    def usage_url(self) -> str:
        return self._url

    async def get(self, force: bool = False) -> QuotaSnapshot:
        """A reading no older than the cache allows; ``force`` always asks the backend."""
        if not force and (cached := self._cached()) is not None:
            return cached
        async with self._lock:
            if not force and (cached := self._cached()) is not None:
                return cached
            if not force and self._error is not None and self._monotonic() < self._error_until:
                raise self._error.copy()
            try:
                snapshot = await self._fetch()
            except BridgeError as error:
                self._error = error
                self._error_until = self._monotonic() + self._error_cache_s
                raise
            self._error = None
            self._remember(snapshot)
            return self._snapshot if self._snapshot is not None else snapshot

    async def status(self, force: bool = False) -> QuotaStatus:
        """Like :meth:`get`, but a failure becomes ``unavailable`` instead of an exception."""
        try:
            return QuotaStatus("available", await self.get(force=force))
        except BridgeError as error:
            return QuotaStatus(
                "unavailable",
                self._snapshot,
                error_code=error.code.value,
                message=error.message,
            )

    def update_from_headers(self, headers: Mapping[str, str]) -> QuotaSnapshot | None:
        """Fold the ``x-codex-*`` headers of any backend answer in; never raises."""
        try:
            snapshot = parse_rate_limit_headers(headers, now=self._wall_clock())
        except Exception:  # a quota display must never break a generation
            return None
        if snapshot is None:
            return None
        self._remember(snapshot)
        return self._snapshot

    # -- internals ------------------------------------------------------------------------

    def _cached(self) -> QuotaSnapshot | None:
        if self._snapshot is not None and self._monotonic() < self._fresh_until:
            return self._snapshot
        return None

    def _remember(self, snapshot: QuotaSnapshot) -> None:
        if self._snapshot is None or snapshot.source == "usage_endpoint":
            merged = snapshot
        else:
            merged = self._snapshot.merged_with(snapshot)
        self._snapshot = merged
        self._fresh_until = self._monotonic() + self._cache_s

    async def _fetch(self) -> QuotaSnapshot:
        credentials = await self._load_credentials()
        headers = {"Authorization": f"Bearer {credentials.access_token}"}
        if credentials.account_id:
            headers["ChatGPT-Account-Id"] = credentials.account_id
        headers["originator"] = ORIGINATOR
        headers["Accept"] = "application/json"
        try:
            async with asyncio.timeout(self._timeout_s):
                http = self._http() if callable(self._http) else self._http
                request = http.build_request("GET", self._url, headers=headers)
                response = await http.send(request, stream=True, follow_redirects=False)
                try:
                    limit = (
                        self._max_body_bytes
                        if response.is_success
                        else min(self._max_body_bytes, MAX_ERROR_BODY_BYTES)
                    )
                    body, overflow = await read_limited(response, limit)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise _usage_error(ErrorCode.TIMEOUT, "The Codex usage endpoint timed out.") from None
        except httpx.HTTPError as exc:
            error = transport_error(exc)
            raise _usage_error(
                error.code, "The Codex usage endpoint could not be reached.", retryable=True
            ) from None
        if not response.is_success:
            error = classify_http_error(
                response.status_code,
                response.headers,
                body,
                now=self._wall_clock(),
                secrets=credentials.secret_values(),
            )
            raise error.with_detail("route", "wham/usage")
        if overflow:
            raise _usage_error(ErrorCode.PROTOCOL, "The Codex usage response is too large.")
        try:
            snapshot = parse_usage_payload(
                parse_json_body(body, what="usage response"), now=self._wall_clock()
            )
        except BridgeError as error:
            raise error.with_detail("route", "wham/usage") from None
        from_headers = parse_rate_limit_headers(response.headers, now=self._wall_clock())
        if from_headers is not None and from_headers.plan_type and not snapshot.plan_type:
            snapshot = replace(snapshot, plan_type=from_headers.plan_type)
        return snapshot


def _usage_error(code: ErrorCode, message: str, *, retryable: bool = False) -> BridgeError:
    return BridgeError(code, message, retryable=retryable, details={"route": "wham/usage"})
