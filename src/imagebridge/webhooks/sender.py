"""One attempt: POST a signed event to a checked address, within a bounded time.

The target is checked (:mod:`.targets`) and resolved again for every attempt, and the
request goes to one of its checked addresses (the URL rewritten to the IP; ``Host`` and TLS
SNI/verification keep the name), so a second DNS answer cannot redirect it. No proxy, no
redirects (a 3xx is a failed attempt), no cookies. The receiver's answer is read up to a
bound and discarded: only its status counts (2xx: delivered). The whole attempt — DNS,
connect, send, answer — is bounded by one timeout.

An attempt never raises: its :class:`Attempt` says what happened, with a stable code for
the deliveries listing (``webhook_timeout``, ``webhook_connect_failed``,
``webhook_http_status``, ``webhook_request_failed`` or a target refusal's reason).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Any

import httpx

from imagebridge._version import __version__
from imagebridge.artifacts.inputs.remote import IPAddress
from imagebridge.contract.errors import BridgeError
from imagebridge.webhooks.targets import (
    INVALID,
    Resolver,
    Target,
    TargetPolicy,
    parse_target,
    resolve_target,
    system_resolver,
)

__all__ = ["Attempt", "WebhookSender"]

TIMEOUT = "webhook_timeout"
CONNECT_FAILED = "webhook_connect_failed"
HTTP_STATUS = "webhook_http_status"
REQUEST_FAILED = "webhook_request_failed"
_MAX_ADDRESSES_TRIED = 4


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one attempt got: the receiver's status, or why there was none."""

    status: int | None
    error_code: str | None = None
    error: str | None = None

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class _ConnectFailed(Exception):
    pass


class WebhookSender:
    """Sends attempts under a :class:`TargetPolicy` and a per-attempt timeout."""

    def __init__(
        self,
        policy: TargetPolicy,
        *,
        timeout_s: float,
        max_response_bytes: int,
        resolver: Resolver | None = None,
        user_agent: str = f"imagegen-bridge/{__version__}",
    ) -> None:
        self.policy = policy
        self._timeout_s = timeout_s
        self._max_response_bytes = max_response_bytes
        self._resolver = resolver or system_resolver
        self._user_agent = user_agent
        self._tls: ssl.SSLContext | None = None

    def _tls_context(self) -> ssl.SSLContext:
        """One verifying TLS context for every attempt (building one costs milliseconds of
        CPU: the system's CA certificates are parsed each time)."""
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    async def send(self, url: str, headers: dict[str, str], body: bytes) -> Attempt:
        try:
            async with asyncio.timeout(self._timeout_s):
                target = await resolve_target(
                    parse_target(url, self.policy), self.policy, self._resolver
                )
                return await self._post(target, headers, body)
        except TimeoutError:
            return Attempt(None, TIMEOUT, f"no answer within {self._timeout_s:g} s")
        except BridgeError as refused:
            return Attempt(None, str(refused.details.get("reason", INVALID)), refused.message)

    async def _post(self, target: Target, headers: dict[str, str], body: bytes) -> Attempt:
        for address in target.addresses[:_MAX_ADDRESSES_TRIED]:
            try:
                return await self._request(target, address, headers, body)
            except _ConnectFailed:  # nothing reached this address: try the next
                continue
        return Attempt(None, CONNECT_FAILED, "could not connect to the receiver")

    def _host_header(self, target: Target) -> str:
        host = target.url.raw_host.decode("ascii")
        if ":" in host:
            host = f"[{host}]"
        return host if target.url.port is None else f"{host}:{target.url.port}"

    async def _request(
        self, target: Target, address: IPAddress, headers: dict[str, str], body: bytes
    ) -> Attempt:
        pinned = target.url.copy_with(host=str(address))
        extensions: dict[str, Any] = {}
        if target.url.scheme == "https":
            extensions["sni_hostname"] = target.host
        request_headers = {
            "Host": self._host_header(target),
            "User-Agent": self._user_agent,
            "Content-Type": "application/json",
            "Accept-Encoding": "identity",
            **headers,
        }
        async with httpx.AsyncClient(
            trust_env=False,
            follow_redirects=False,
            timeout=self._timeout_s,
            verify=self._tls_context(),
        ) as client:
            request = client.build_request(
                "POST", pinned, headers=request_headers, content=body, extensions=extensions
            )
            try:
                response = await client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                raise _ConnectFailed from exc
            except httpx.HTTPError:
                return Attempt(None, REQUEST_FAILED, "the request to the receiver failed")
            try:
                await self._drain(response)
            finally:
                await response.aclose()
        if 200 <= response.status_code < 300:
            return Attempt(response.status_code)
        return Attempt(
            response.status_code, HTTP_STATUS, f"the receiver answered HTTP {response.status_code}"
        )

    async def _drain(self, response: httpx.Response) -> None:
        """Read (and drop) at most ``max_response_bytes`` of the answer."""
        read = 0
        try:
            async for chunk in response.aiter_raw():
                read += len(chunk)
                if read >= self._max_response_bytes:
                    return
        except httpx.HTTPError:
            return
