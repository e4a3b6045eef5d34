"""The HTTP side of an OpenAI Images call, on aiohttp.

Why aiohttp: an image answer is one large body (a 1024² noise PNG is 4.2 MB as
``b64_json``). Read through httpx (httpcore, h11: each piece copied into h11's buffer,
sliced out, wrapped, copied again) it cost the bridge ~9 ms of CPU per answer; aiohttp's
C parser hands the socket's pieces over as they are, ~1.3 ms (bench/gateway.py,
``bench/README.md``). aiohttp's 64 KiB read buffer is kept: with 1 MiB, its reader joins the
pieces it buffered and the same read cost ~8 ms. Only this provider's upstream calls use
aiohttp; the other providers keep httpx.

What the provider relies on here:

- **Dispatch tracing.** :class:`CallTrace` turns ``dispatched`` on as soon as a connection
  to the upstream is in hand (new or reused), before the request's first byte leaves. A
  failure before that cannot have reached the upstream and may be retried; anything after
  it is an unknown outcome. (httpx's hook fired when the headers started to leave; the
  moment between the two only ever holds the write itself, so nothing retryable is lost.)
- **No ambient credentials.** The session never reads ``.netrc``; proxies come from the
  usual variables (``HTTP(S)_PROXY``, ``NO_PROXY``) only when the provider trusts the
  environment, and the certificates from httpx's default context (certifi, or
  ``SSL_CERT_FILE``/``SSL_CERT_DIR``), as before.
- **Exact byte bounds.** aiohttp never decompresses here: an answer that comes compressed
  although ``identity`` was asked for is refused by the provider, so every limit counts the
  bytes that arrived.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httpx

__all__ = [
    "PREALLOCATE_MAX_BYTES",
    "CallTrace",
    "UpstreamSession",
    "failure_kind",
    "json_payload",
    "multipart_payload",
    "proxy_for",
    "read_body",
    "read_prefix",
]

IDLE_CONNECTION_S = 4.0
"""An idle connection is reused for this long, just under the 5 s after which uvicorn (and
so many OpenAI-compatible servers) closes it: a request written on a connection the server
is closing at that moment fails after it may have been read, an unknown outcome. (httpx, used
before, kept idle connections 5 s.)"""


@dataclass(slots=True)
class CallTrace:
    """What is known about how far one upstream exchange got."""

    dispatched: bool = False
    """A connection was in hand: the request may have reached the upstream."""


async def _connection_ready(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: object
) -> None:
    trace = context.trace_request_ctx
    if isinstance(trace, CallTrace):
        trace.dispatched = True


def _tracing() -> aiohttp.TraceConfig:
    config = aiohttp.TraceConfig()
    config.on_connection_create_end.append(_connection_ready)
    config.on_connection_reuseconn.append(_connection_ready)
    return config


class UpstreamSession:
    """One aiohttp session per event loop, created on first use and closed on shutdown."""

    def __init__(self, *, trust_env: bool) -> None:
        self.trust_env = trust_env
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ssl: ssl.SSLContext | None = None

    def _current(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context(trust_env=self.trust_env)
            connector = aiohttp.TCPConnector(
                limit=0, ssl=self._ssl, keepalive_timeout=IDLE_CONNECTION_S
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,  # no .netrc; proxies are chosen per call below
                auto_decompress=False,
                trace_configs=[_tracing()],
            )
            self._loop = loop
        return self._session

    @asynccontextmanager
    async def post(
        self,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | aiohttp.FormData,
        timeout: aiohttp.ClientTimeout,
        trace: CallTrace,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """``POST`` ``body`` to ``url``; the answer's body is read by the caller."""
        session = self._current()
        async with session.post(
            url,
            data=body,
            headers=dict(headers),
            timeout=timeout,
            allow_redirects=False,
            proxy=proxy_for(url) if self.trust_env else None,
            trace_request_ctx=trace,
        ) as response:
            yield response

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._loop is asyncio.get_running_loop():
            await session.close()


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP(S)_PROXY``, ``ALL_PROXY``), unless
    ``NO_PROXY`` exempts its host."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies_environment()
    return proxies.get(parts.scheme) or proxies.get("all")


def json_payload(body: Mapping[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The JSON bytes of ``body`` (compact, UTF-8) and their content type."""
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return data.encode(), {"Content-Type": "application/json"}


def multipart_payload(
    form: Mapping[str, str], files: list[tuple[str, tuple[str, bytes, str]]]
) -> aiohttp.FormData:
    """A ``multipart/form-data`` body: the fields first, then each file part in order."""
    payload = aiohttp.FormData()
    for name, value in form.items():
        payload.add_field(name, value)
    for name, (filename, data, content_type) in files:
        payload.add_field(name, data, filename=filename, content_type=content_type)
    return payload


PREALLOCATE_MAX_BYTES = 64 * 1024 * 1024
"""Largest declared body given its buffer before it arrives (larger ones are joined)."""


async def read_body(
    chunks: AsyncIterable[bytes], declared: int | None, limit: int
) -> bytes | bytearray | None:
    """The whole body, or ``None`` once it exceeds ``limit`` bytes.

    Each piece is copied once: into a buffer of the declared length, else joined at the
    end (a buffer grown piece by piece re-copies a 4 MB answer ~8 times). A buffer is
    allocated before the data arrives, so only up to :data:`PREALLOCATE_MAX_BYTES`.
    """
    if declared is None or declared > min(limit, PREALLOCATE_MAX_BYTES):
        pieces: list[bytes] = []
        total = 0
        async for chunk in chunks:
            total += len(chunk)
            if total > limit:
                return None
            pieces.append(chunk)
        return b"".join(pieces)
    buffer = bytearray(declared)
    filled = 0
    async for chunk in chunks:
        if filled + len(chunk) > declared:
            return None  # more than declared: the parser refuses that first, a backstop
        buffer[filled : filled + len(chunk)] = chunk
        filled += len(chunk)
    return buffer if filled == declared else buffer[:filled]


async def read_prefix(chunks: AsyncIterable[bytes], limit: int) -> bytes:
    """At most ``limit`` bytes of the body; the rest is never read."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk[: limit - len(body)]
        if len(body) >= limit:
            break
    return bytes(body)


def failure_kind(exc: BaseException) -> str:
    """A short, stable name for a transport failure (its class), for error details."""
    return type(exc).__name__[:64]
