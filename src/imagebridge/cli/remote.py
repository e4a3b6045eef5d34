"""The CLI's view of a running bridge, on top of the SDK's :class:`AsyncImageBridgeClient`.

``--remote URL`` (or ``$IMAGEGEN_BRIDGE_URL``) sends ``generate``/``edit``, presets,
sessions, providers and jobs to a bridge over its v1 API instead of running the engine
in-process. Every call goes through :mod:`imagebridge.client`, so the CLI and scripts share
one set of rules: URL checks (the bearer token is sent only over https or to a loopback
host), bounded answers, answers validated by the contract models, and the bridge's own
error (a request that may have reached the bridge before the connection broke is reported
with an unknown outcome). The CLI never retries on its own (``max_retries=0``): a retryable
failure exits with its status (5 for rate limits) and the caller decides. Answers are
returned in wire form (``to_wire()``), exactly what the local commands print.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Self, TypeVar

import httpx

from imagebridge.client import AsyncImageBridgeClient, BridgeAPIError
from imagebridge.client._config import normalize_base_url as _client_base_url
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "RemoteBridge", "normalize_base_url"]

T = TypeVar("T")

DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024
DEFAULT_READ_TIMEOUT_S = 60.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DASHBOARD_TITLE = b"<title>Imagegen Bridge</title>"
MAX_DASHBOARD_PROBE_BYTES = 1024 * 1024
_REMOTE_SUGGESTION = "Pass --remote http://127.0.0.1:8787 (or set IMAGEGEN_BRIDGE_URL)."
_CONNECT_SUGGESTION = (
    "Start a bridge with `imagegen-bridge serve`, or check --remote / IMAGEGEN_BRIDGE_URL."
)


def _for_the_cli(error: BridgeError) -> BridgeError:
    """The SDK's error in CLI terms: flags instead of keyword arguments, and the request
    id (an attribute of :class:`BridgeAPIError`) in ``details`` so ``--json`` shows it."""
    if error.code is ErrorCode.CONFIGURATION and error.details.get("field") == "base_url":
        return BridgeError(
            ErrorCode.CONFIGURATION,
            error.message.replace("pass token= or set", "use"),
            details={"field": "remote"},
            suggestions=[_REMOTE_SUGGESTION],
        )
    if isinstance(error, BridgeAPIError):
        if error.request_id is not None:
            error.details.setdefault("request_id", error.request_id)
        if error.status_code is None and error.code is ErrorCode.UPSTREAM:
            error.suggestions = [_CONNECT_SUGGESTION]
    return error


def normalize_base_url(url: str, *, sends_token: bool) -> str:
    """Check a bridge URL (the SDK's rules) and return it without a trailing slash."""
    try:
        return _client_base_url(url, sends_token=sends_token)
    except BridgeError as error:
        raise _for_the_cli(error) from None


class RemoteBridge:
    """One bridge, for the CLI; use as ``async with RemoteBridge(...) as bridge``."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = normalize_base_url(base_url, sends_token=token is not None)
        self._timeout = httpx.Timeout(DEFAULT_READ_TIMEOUT_S, connect=connect_timeout)
        self._http = httpx.AsyncClient(
            headers={"User-Agent": "imagegen-bridge-cli"},
            timeout=self._timeout,
            follow_redirects=False,
            trust_env=False,
            transport=transport,
        )
        try:
            self.client = AsyncImageBridgeClient(
                self.base_url,
                token=token,
                timeout=self._timeout,
                max_retries=0,
                max_response_bytes=max_response_bytes,
                default_headers={"User-Agent": "imagegen-bridge-cli"},
                http_client=self._http,
                env={},  # the CLI has already chosen the URL and the token
            )
        except BridgeError as error:
            raise _for_the_cli(error) from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.client.aclose()
        await self._http.aclose()

    @staticmethod
    async def _call(call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await call()
        except BridgeError as error:
            raise _for_the_cli(error) from None

    # -- images ----------------------------------------------------------------------------

    async def generate(self, request: Mapping[str, Any], *, timeout_s: float | None) -> Any:
        """``POST /v1/images`` (generate or edit); ``timeout_s`` bounds the wait for the answer."""
        timeout = httpx.Timeout(
            DEFAULT_READ_TIMEOUT_S, connect=self._timeout.connect, read=timeout_s
        )
        images = self.client.images
        send = images.edit if request.get("operation") == "edit" else images.generate
        response = await self._call(lambda: send(request, timeout=timeout))
        return response.to_wire()

    # -- providers and sessions -----------------------------------------------------------

    async def providers(self) -> list[Any]:
        async def every() -> list[Any]:
            return [item.to_wire() async for item in self.client.providers.iter()]

        return await self._call(every)

    async def capabilities(self, provider: str, model: str | None) -> Any:
        caps = await self._call(lambda: self.client.providers.capabilities(provider, model=model))
        return caps.to_wire()

    async def diagnostics(self) -> dict[str, Any]:
        """``GET /v1/diagnostics/extended``: readiness and each provider's extras (quota
        windows), which the original's ``/v1/diagnostics`` document cannot carry."""
        return await self._call(functools.partial(self.client.diagnostics, extended=True))

    async def get_session(self, key: str, provider: str | None) -> Any:
        session = await self._call(lambda: self.client.sessions.get(key, provider=provider))
        return session.to_wire()

    async def delete_session(self, key: str, provider: str | None) -> None:
        await self._call(lambda: self.client.sessions.delete(key, provider=provider))

    # -- presets ------------------------------------------------------------------------------

    async def list_presets(self, *, limit: int, cursor: str | None = None) -> Any:
        page = await self._call(lambda: self.client.presets.list(limit=limit, cursor=cursor))
        return page.to_wire()

    async def get_preset(self, name: str) -> Any:
        return (await self._call(lambda: self.client.presets.get(name))).to_wire()

    async def create_preset(self, body: Mapping[str, Any]) -> Any:
        preset = await self._call(
            lambda: self.client.presets.create(
                body["name"], body["template"], description=body.get("description")
            )
        )
        return preset.to_wire()

    async def replace_preset(self, name: str, body: Mapping[str, Any]) -> Any:
        preset = await self._call(
            lambda: self.client.presets.replace(
                name, body["template"], description=body.get("description")
            )
        )
        return preset.to_wire()

    async def delete_preset(self, name: str) -> None:
        await self._call(lambda: self.client.presets.delete(name))

    # -- jobs -----------------------------------------------------------------------------------

    async def list_jobs(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        status: str | None = None,
        visibility: str | None = None,
        favorite: bool | None = None,
        search: str | None = None,
    ) -> Any:
        page = await self._call(
            lambda: self.client.jobs.list(
                limit=limit,
                cursor=cursor,
                status=status,
                visibility=visibility,
                favorite=favorite,
                search=search,
            )
        )
        return page.to_wire()

    async def get_job(self, job_id: str) -> Any:
        return (await self._call(lambda: self.client.jobs.get(job_id))).to_wire()

    async def cancel_job(self, job_id: str) -> Any:
        return (await self._call(lambda: self.client.jobs.cancel(job_id))).to_wire()

    # -- dashboard probe ------------------------------------------------------------------------

    async def dashboard_is_running(self, timeout_s: float = 1.0) -> bool:
        """Whether ``GET /dashboard`` answers 200 with the dashboard's title within the time.

        The page is HTML, not an API answer, so this reads it with the same HTTP client
        directly, bounded in time and bytes."""
        try:
            async with self._http.stream(
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
                    if total > MAX_DASHBOARD_PROBE_BYTES:
                        break
        except httpx.HTTPError:
            return False
        return False
