"""HTTP client settings and bounded body reads shared by every Codex backend call.

A bearer token must only ever go where the configuration says: redirects are never
followed and ambient proxy variables are ignored. Bodies are read with
a hard cap so a misbehaving peer cannot make the bridge buffer without limit.
"""

from __future__ import annotations

import asyncio

import httpx

__all__ = ["DEFAULT_TIMEOUT_S", "CodexHttpClient", "new_http_client", "read_limited"]

DEFAULT_TIMEOUT_S = 300.0


def new_http_client() -> httpx.AsyncClient:
    """An async client for the Codex backend: no redirects, no proxies from the environment,
    no library User-Agent.

    Answers are asked for uncompressed, so every byte bound applies to what is on the wire.
    Calls pass their own timeout (time left to the deadline); the client default only
    covers a caller that forgets. The pool is unbounded because the fan-out decorator
    already bounds how many calls run at once.
    """
    client = httpx.AsyncClient(
        follow_redirects=False,
        trust_env=False,
        headers={"Accept-Encoding": "identity"},
        timeout=httpx.Timeout(DEFAULT_TIMEOUT_S),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
    )
    # The original sends exactly its listed headers and no User-Agent;
    # httpx would otherwise announce itself on every call.
    del client.headers["User-Agent"]
    return client


async def read_limited(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of a streamed body, and whether more were there."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


class CodexHttpClient:
    """One :class:`httpx.AsyncClient` per event loop, created on first use.

    Connections belong to the loop that opened them; a provider built outside any loop
    (the application factory) or used from a new loop (tests) gets a fresh client there.
    """

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = new_http_client()
            self._loop = loop
        return self._client

    @property
    def fresh(self) -> bool:
        """Whether the next :meth:`get` from the running loop builds a new client."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return True
        return self._client is None or self._loop is not loop

    async def aclose(self) -> None:
        client, loop = self._client, self._loop
        self._client = self._loop = None
        if client is not None and loop is asyncio.get_running_loop():
            await client.aclose()
