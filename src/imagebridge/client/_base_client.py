"""The transports under both clients: send one :class:`RequestSpec`, bounded and retried.

Each try streams the answer and counts its bytes against ``max_response_bytes`` (the
``Content-Length`` is checked first when present), so an oversized or endless answer
fails with a clear ``protocol`` error instead of exhausting memory. A failed try is
repeated only when :meth:`RetryPolicy.should_retry` agrees; the ``Idempotency-Key`` the
spec carries (given or generated) is the same on every try of one call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from imagebridge.client._config import ClientSettings
from imagebridge.client._constants import USER_AGENT
from imagebridge.client._exceptions import (
    BridgeAPIError,
    connection_error,
    error_from_response,
    protocol_error,
    sent_request_error,
    too_large_error,
)
from imagebridge.client._request import RawResponse, RequestSpec
from imagebridge.client._sse import SSEDecoder
from imagebridge.client._streaming import AsyncStream, Stream
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["AsyncTransport", "SyncTransport"]

T = TypeVar("T")

MAX_ERROR_BODY_BYTES = 1024 * 1024
"""Enough for any error envelope; a bigger error body is judged by its status alone."""
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

# Indirection points for tests that check the waits without sleeping through them.
sleep: Callable[[float], None] = time.sleep
async_sleep: Callable[[float], Any] = asyncio.sleep


def _base_headers(settings: ClientSettings) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    headers.update(settings.default_headers)
    if settings.token is not None:
        headers["Authorization"] = f"Bearer {settings.token}"
    return headers


def _timeout(settings: ClientSettings, spec: RequestSpec[Any]) -> httpx.Timeout:
    timeout = spec.timeout or settings.timeout
    minimum = spec.min_read_timeout
    if minimum is not None and timeout.read is not None and timeout.read < minimum:
        return httpx.Timeout(
            connect=timeout.connect, read=minimum, write=timeout.write, pool=timeout.pool
        )
    return timeout


def _build(client: httpx.Client | httpx.AsyncClient, settings: ClientSettings,
           spec: RequestSpec[Any]) -> httpx.Request:  # fmt: skip
    headers = _base_headers(settings)
    headers.update(spec.headers)
    content: bytes | None = None
    if spec.json_body is not None:
        content = spec.json_body
        headers["Content-Type"] = "application/json"
    try:
        return client.build_request(
            spec.method,
            settings.base_url + spec.path,
            params=spec.params,
            content=content,
            data=spec.form if spec.files is not None else None,
            files=spec.files,
            headers=headers,
            timeout=_timeout(settings, spec),
        )
    except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError, TypeError) as exc:
        raise BridgeAPIError(
            ErrorCode.INVALID_REQUEST, "the request could not be encoded for the bridge"
        ) from exc


def _checked_length(response: httpx.Response, limit: int) -> None:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large_error(limit, status_code=response.status_code, headers=response.headers)


def _answer(spec: RequestSpec[T], status: int, headers: httpx.Headers, body: bytes) -> T:
    if status in spec.expected:
        return spec.parse(RawResponse(status, headers, body))
    raise _failure(spec, status, headers, body)


def _failure(
    spec: RequestSpec[Any], status: int, headers: httpx.Headers, body: bytes
) -> BridgeAPIError:
    """The error for an answer the call did not expect (redirects are never followed)."""
    if status < 400:
        return protocol_error(
            f"the bridge answered with an unexpected HTTP {status}",
            status_code=status,
            headers=headers,
        )
    return error_from_response(status, headers, body, safe=spec.safe)


def _transport_failure(url: str, spec: RequestSpec[Any], exc: httpx.HTTPError) -> BridgeAPIError:
    if isinstance(exc, _NEVER_SENT):
        return connection_error(url, exc)
    return sent_request_error(url, exc, safe=spec.safe)


class _Retrying:
    """The part of the retry loop that does not depend on sync or async I/O."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings

    def next_delay(self, spec: RequestSpec[Any], error: BridgeError, attempt: int) -> float | None:
        retry_after = error.retry_after if isinstance(error, BridgeAPIError) else None
        policy = self.settings.retry
        if not policy.should_retry(
            error, attempt=attempt, repeatable=spec.repeatable, retry_after=retry_after
        ):
            return None
        return policy.delay(attempt, retry_after)


class SyncTransport:
    def __init__(self, settings: ClientSettings, http_client: httpx.Client | None) -> None:
        self.settings = settings
        self._owned = http_client is None
        self._http = http_client or httpx.Client(
            timeout=settings.timeout, follow_redirects=False, trust_env=False
        )
        self._retrying = _Retrying(settings)

    @property
    def http(self) -> httpx.Client:
        return self._http

    def close(self) -> None:
        if self._owned:
            self._http.close()

    def execute(self, spec: RequestSpec[T]) -> T:
        """Send ``spec`` (with retries) and return its parsed answer."""
        spec.prepare_headers(self.settings.retry.enabled)
        attempt = 0
        while True:
            try:
                return self._once(spec)
            except BridgeError as error:
                delay = self._retrying.next_delay(spec, error, attempt)
                if delay is None:
                    raise
            sleep(delay)
            attempt += 1

    def _once(self, spec: RequestSpec[T]) -> T:
        request = _build(self._http, self.settings, spec)
        try:
            response = self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _transport_failure(str(request.url.copy_with(query=None)), spec, exc) from exc
        try:
            limit = (
                self.settings.max_response_bytes
                if response.status_code in spec.expected
                else MAX_ERROR_BODY_BYTES
            )
            body = self._read(response, limit, spec)
        finally:
            response.close()
        return _answer(spec, response.status_code, response.headers, body)

    def _read(self, response: httpx.Response, limit: int, spec: RequestSpec[Any]) -> bytes:
        success = response.status_code in spec.expected
        if success:
            _checked_length(response, limit)
        chunks: list[bytes] = []
        total = 0
        try:
            for chunk in response.iter_bytes():
                total += len(chunk)
                if total > limit:
                    if success:
                        raise too_large_error(
                            limit, status_code=response.status_code, headers=response.headers
                        )
                    break  # an oversized error body: judged by its status
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            url = str(response.request.url.copy_with(query=None))
            raise sent_request_error(url, exc, safe=spec.safe) from exc
        return b"".join(chunks)

    def open_stream(self, spec: RequestSpec[Any]) -> Stream:
        """Send ``spec`` and return its event stream once the bridge answered 200."""
        spec.prepare_headers(self.settings.retry.enabled)
        spec.headers["Accept"] = "text/event-stream"
        attempt = 0
        while True:
            try:
                return self._open_once(spec)
            except BridgeError as error:
                delay = self._retrying.next_delay(spec, error, attempt)
                if delay is None:
                    raise
            sleep(delay)
            attempt += 1

    def _open_once(self, spec: RequestSpec[Any]) -> Stream:
        request = _build(self._http, self.settings, spec)
        url = str(request.url.copy_with(query=None))
        try:
            response = self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _transport_failure(url, spec, exc) from exc
        if response.status_code == 200 and _is_event_stream(response):
            return Stream(response, url=url, decoder=self._decoder())
        try:
            body = self._read(response, MAX_ERROR_BODY_BYTES, _as_error(spec))
        finally:
            response.close()
        raise _stream_failure(spec, response, body)

    def _decoder(self) -> SSEDecoder:
        return SSEDecoder(
            max_event_bytes=self.settings.max_response_bytes,
            max_total_bytes=self.settings.max_stream_bytes,
        )


class AsyncTransport:
    def __init__(self, settings: ClientSettings, http_client: httpx.AsyncClient | None) -> None:
        self.settings = settings
        self._owned = http_client is None
        self._http = http_client or httpx.AsyncClient(
            timeout=settings.timeout, follow_redirects=False, trust_env=False
        )
        self._retrying = _Retrying(settings)

    @property
    def http(self) -> httpx.AsyncClient:
        return self._http

    async def aclose(self) -> None:
        if self._owned:
            await self._http.aclose()

    async def execute(self, spec: RequestSpec[T]) -> T:
        spec.prepare_headers(self.settings.retry.enabled)
        attempt = 0
        while True:
            try:
                return await self._once(spec)
            except BridgeError as error:
                delay = self._retrying.next_delay(spec, error, attempt)
                if delay is None:
                    raise
            await async_sleep(delay)
            attempt += 1

    async def _once(self, spec: RequestSpec[T]) -> T:
        request = _build(self._http, self.settings, spec)
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _transport_failure(str(request.url.copy_with(query=None)), spec, exc) from exc
        try:
            limit = (
                self.settings.max_response_bytes
                if response.status_code in spec.expected
                else MAX_ERROR_BODY_BYTES
            )
            body = await self._read(response, limit, spec)
        finally:
            await response.aclose()
        return _answer(spec, response.status_code, response.headers, body)

    async def _read(self, response: httpx.Response, limit: int, spec: RequestSpec[Any]) -> bytes:
        success = response.status_code in spec.expected
        if success:
            _checked_length(response, limit)
        chunks: list[bytes] = []
        total = 0
        try:
            async for chunk in response.aiter_bytes():
                total += len(chunk)
                if total > limit:
                    if success:
                        raise too_large_error(
                            limit, status_code=response.status_code, headers=response.headers
                        )
                    break
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            url = str(response.request.url.copy_with(query=None))
            raise sent_request_error(url, exc, safe=spec.safe) from exc
        return b"".join(chunks)

    async def open_stream(self, spec: RequestSpec[Any]) -> AsyncStream:
        spec.prepare_headers(self.settings.retry.enabled)
        spec.headers["Accept"] = "text/event-stream"
        attempt = 0
        while True:
            try:
                return await self._open_once(spec)
            except BridgeError as error:
                delay = self._retrying.next_delay(spec, error, attempt)
                if delay is None:
                    raise
            await async_sleep(delay)
            attempt += 1

    async def _open_once(self, spec: RequestSpec[Any]) -> AsyncStream:
        request = _build(self._http, self.settings, spec)
        url = str(request.url.copy_with(query=None))
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _transport_failure(url, spec, exc) from exc
        if response.status_code == 200 and _is_event_stream(response):
            return AsyncStream(response, url=url, decoder=self._decoder())
        try:
            body = await self._read(response, MAX_ERROR_BODY_BYTES, _as_error(spec))
        finally:
            await response.aclose()
        raise _stream_failure(spec, response, body)

    def _decoder(self) -> SSEDecoder:
        return SSEDecoder(
            max_event_bytes=self.settings.max_response_bytes,
            max_total_bytes=self.settings.max_stream_bytes,
        )


def _is_event_stream(response: httpx.Response) -> bool:
    media = str(response.headers.get("content-type", "")).split(";", 1)[0]
    return media.strip().lower() == "text/event-stream"


def _as_error(spec: RequestSpec[Any]) -> RequestSpec[Any]:
    """The spec seen from a non-stream answer: no status counts as success."""
    return RequestSpec(
        spec.method, spec.path, spec.parse, headers=spec.headers, expected=frozenset()
    )


def _stream_failure(
    spec: RequestSpec[Any], response: httpx.Response, body: bytes
) -> BridgeAPIError:
    if response.status_code == 200:
        return protocol_error(
            "the bridge did not answer with an event stream",
            status_code=200,
            headers=response.headers,
        )
    return _failure(spec, response.status_code, response.headers, body)
