"""A small HTTP client for exactly what the CLI asks of a running bridge.

``--remote URL`` (or ``$IMAGEGEN_BRIDGE_URL``) sends ``generate``/``edit``, presets,
sessions, providers and jobs to a bridge over its v1 API instead of running the engine
in-process. Errors come back as the bridge's own :class:`BridgeError` (parsed from the
error envelope); a request that may have reached the bridge before the connection broke
is reported with an unknown outcome and is never retried. The bearer token comes from
``$IMAGEGEN_BRIDGE_TOKEN`` and is sent only over https or to a loopback host.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from typing import Any, Self
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from imagebridge.contract.envelope import ErrorEnvelope
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "RemoteBridge", "normalize_base_url"]

DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024
DASHBOARD_TITLE = b"<title>Imagegen Bridge</title>"
_CONNECT_SUGGESTION = (
    "Start a bridge with `imagegen-bridge serve`, or check --remote / IMAGEGEN_BRIDGE_URL."
)
_STATUS_CODES = {
    401: ErrorCode.AUTHENTICATION,
    403: ErrorCode.PERMISSION_DENIED,
    404: ErrorCode.INVALID_REQUEST,
    408: ErrorCode.TIMEOUT,
    409: ErrorCode.IDEMPOTENCY_CONFLICT,
    422: ErrorCode.INVALID_REQUEST,
    429: ErrorCode.RATE_LIMITED,
    503: ErrorCode.OVERLOADED,
    504: ErrorCode.TIMEOUT,
}


def _config_error(message: str) -> BridgeError:
    return BridgeError(
        ErrorCode.CONFIGURATION,
        message,
        details={"field": "remote"},
        suggestions=["Pass --remote http://127.0.0.1:8787 (or set IMAGEGEN_BRIDGE_URL)."],
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_base_url(url: str, *, sends_token: bool) -> str:
    """Check a bridge URL and return it without a trailing slash.

    http(s) only, a host, no credentials, query or fragment; a path prefix (a reverse
    proxy mount) is kept. A token is never sent in clear text beyond this machine.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise _config_error("bridge URL is malformed") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _config_error("bridge URL must be an http or https URL with a host")
    if parts.username is not None or parts.password is not None:
        raise _config_error("bridge URL must not contain credentials; use IMAGEGEN_BRIDGE_TOKEN")
    if parts.query or parts.fragment:
        raise _config_error("bridge URL must not contain a query or fragment")
    if sends_token and parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise _config_error(
            "refusing to send the bearer token over plain http to a non-loopback host; use https"
        )
    del port  # validated above (a bad port raises ValueError)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _segment(value: str) -> str:
    return quote(value, safe="")


class RemoteBridge:
    """Async client for one bridge; use as ``async with RemoteBridge(...) as bridge``."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        connect_timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = normalize_base_url(base_url, sends_token=token is not None)
        self._max_response_bytes = max_response_bytes
        headers = {"Accept": "application/json", "User-Agent": "imagegen-bridge-cli"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(60.0, connect=connect_timeout),
            follow_redirects=False,
            trust_env=False,
            transport=transport,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- transport -------------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        read_timeout: float | None = 60.0,
        side_effects: bool = False,
    ) -> tuple[int, Any]:
        """Send one request and decode a JSON answer (``None`` for an empty body).

        ``side_effects``: a failure after the request was sent leaves an unknown outcome.
        """
        url = self.base_url + path
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        request_headers = dict(headers or {})
        if content is not None:
            request_headers["Content-Type"] = "application/json"
        timeout = httpx.Timeout(60.0, connect=10.0, read=read_timeout)
        try:
            async with self._client.stream(
                method,
                url,
                content=content,
                params=params,
                headers=request_headers,
                timeout=timeout,
            ) as response:
                raw = await self._read_bounded(response)
                status = response.status_code
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise BridgeError(
                ErrorCode.UPSTREAM,
                "could not connect to the bridge",
                retryable=True,
                details={"url": self.base_url},
                suggestions=[_CONNECT_SUGGESTION],
            ) from exc
        except httpx.HTTPError as exc:
            error = BridgeError(
                ErrorCode.UPSTREAM,
                "the connection to the bridge failed before its answer arrived",
                retryable=not side_effects,
                details={"url": self.base_url},
            )
            if side_effects:
                error.mark_unknown_outcome()
            raise error from exc
        if status >= 400:
            raise self._error(status, raw)
        if not raw:
            return status, None
        try:
            return status, json.loads(raw)
        except (ValueError, RecursionError):
            raise BridgeError(ErrorCode.PROTOCOL, "the bridge answered with invalid JSON") from None

    async def _read_bounded(self, response: httpx.Response) -> bytes:
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max_response_bytes:
            raise self._too_large()
        chunks: list[bytes] = []
        total = 0
        async for chunk in response.aiter_bytes():
            total += len(chunk)
            if total > self._max_response_bytes:
                raise self._too_large()
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self) -> BridgeError:
        return BridgeError(
            ErrorCode.PROTOCOL,
            "the bridge's answer exceeds the configured response size limit",
            details={"max_bytes": self._max_response_bytes},
        )

    @staticmethod
    def _error(status: int, raw: bytes) -> BridgeError:
        try:
            envelope = ErrorEnvelope.model_validate_json(raw)
        except ValueError:
            code = _STATUS_CODES.get(status, ErrorCode.UPSTREAM)
            return BridgeError(
                code,
                f"the bridge answered HTTP {status} without an error envelope",
                retryable=status in (429, 502, 503, 504),
                details={"status": status},
            )
        error = envelope.to_error()
        error.details.setdefault("request_id", envelope.request_id)
        return error

    # -- images ----------------------------------------------------------------------------

    async def generate(self, request: dict[str, Any], *, timeout_s: float | None) -> Any:
        """``POST /v1/images``; ``timeout_s`` bounds the wait for the answer."""
        _, body = await self._call(
            "POST", "/v1/images", body=request, read_timeout=timeout_s, side_effects=True
        )
        return body

    # -- providers and sessions -----------------------------------------------------------

    async def providers(self) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(1000):  # bounded paging
            params = {"limit": "100"}
            if cursor is not None:
                params["cursor"] = cursor
            _, page = await self._call("GET", "/v1/providers", params=params)
            if not isinstance(page, dict) or not isinstance(page.get("items"), list):
                raise BridgeError(ErrorCode.PROTOCOL, "the bridge sent a malformed provider page")
            items.extend(page["items"])
            cursor = page.get("next_cursor")
            if not isinstance(cursor, str):
                break
        return items

    async def capabilities(self, provider: str, model: str | None) -> Any:
        params = {"model": model} if model else None
        path = f"/v1/providers/{_segment(provider)}/capabilities"
        return (await self._call("GET", path, params=params))[1]

    async def get_session(self, key: str, provider: str | None) -> Any:
        params = {"provider": provider} if provider else None
        return (await self._call("GET", f"/v1/sessions/{_segment(key)}", params=params))[1]

    async def delete_session(self, key: str, provider: str | None) -> None:
        params = {"provider": provider} if provider else None
        await self._call("DELETE", f"/v1/sessions/{_segment(key)}", params=params)

    # -- presets ------------------------------------------------------------------------------

    async def list_presets(self, *, limit: int, cursor: str | None = None) -> Any:
        params = {"limit": str(limit)}
        if cursor is not None:
            params["cursor"] = cursor
        return (await self._call("GET", "/v1/presets", params=params))[1]

    async def get_preset(self, name: str) -> Any:
        return (await self._call("GET", f"/v1/presets/{_segment(name)}"))[1]

    async def create_preset(self, body: dict[str, Any]) -> Any:
        return (await self._call("POST", "/v1/presets", body=body, side_effects=True))[1]

    async def replace_preset(self, name: str, body: dict[str, Any]) -> Any:
        path = f"/v1/presets/{_segment(name)}"
        return (await self._call("PUT", path, body=body, side_effects=True))[1]

    async def delete_preset(self, name: str) -> None:
        await self._call("DELETE", f"/v1/presets/{_segment(name)}", side_effects=True)

    # -- jobs -----------------------------------------------------------------------------------

    async def list_jobs(self, params: Mapping[str, str]) -> Any:
        return (await self._call("GET", "/v1/jobs", params=params))[1]

    async def get_job(self, job_id: str) -> Any:
        return (await self._call("GET", f"/v1/jobs/{_segment(job_id)}"))[1]

    async def cancel_job(self, job_id: str) -> Any:
        return (await self._call("DELETE", f"/v1/jobs/{_segment(job_id)}", side_effects=True))[1]

    # -- dashboard probe ------------------------------------------------------------------------

    async def dashboard_is_running(self, timeout_s: float = 1.0) -> bool:
        """Whether ``GET /dashboard`` answers 200 with the dashboard's title within the time."""
        try:
            async with self._client.stream(
                "GET", self.base_url + "/dashboard", timeout=httpx.Timeout(timeout_s)
            ) as response:
                if response.status_code != 200:
                    return False
                tail = b""
                total = 0
                async for chunk in response.aiter_bytes():
                    window = tail + chunk
                    if DASHBOARD_TITLE in window:
                        return True
                    tail = window[-len(DASHBOARD_TITLE) :]
                    total += len(chunk)
                    if total > 1024 * 1024:
                        break
        except httpx.HTTPError:
            return False
        return False
