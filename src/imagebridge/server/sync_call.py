"""One synchronous request's engine call, as its HTTP caller: charge, watch, run, answer.

:class:`SyncCall` holds what a route knows about the request (the checked ``ImageRequest``,
the caller, its presence, its event sink) and runs it once through the engine: on an API
key's quota when the caller has a key (one :meth:`~imagebridge.keys.KeyService.charge`),
watching the client unless a stream does that itself, with the key's session names scoped
and unscoped. Whether the run leads a history record or joins another one is decided above
it (:mod:`imagebridge.server.joins`); where a record keeps its images comes in as an
argument.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from starlette.requests import Request

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import Deadline
from imagebridge.engine.keep import KeptImages, ProviderDispatch
from imagebridge.engine.provider import EventSink
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.keys import KeyService, scope_request_session, unscope_response_session
from imagebridge.server.auth import quota_headers
from imagebridge.server.context import RequestContext
from imagebridge.server.presence import ClientPresence, watch_disconnect
from imagebridge.server.state import BridgeState
from imagebridge.storage.records import JobOrigin, KeyRecord

__all__ = ["SyncCall"]

T = TypeVar("T")
logger = logging.getLogger("imagebridge.server")


class SyncCall:
    """A checked synchronous request and its caller (see the module docstring)."""

    def __init__(
        self,
        state: BridgeState,
        http: Request,
        context: RequestContext,
        image_request: ImageRequest,
        *,
        origin: JobOrigin,
        presence: ClientPresence,
        dispatch: ProviderDispatch,
        events: EventSink | None,
        watch_client: bool,
    ) -> None:
        self.state = state
        self.http = http
        self.context = context
        self.image_request = image_request
        self.origin = origin
        self.presence = presence
        self.dispatch = dispatch
        self.events = events
        self.watch_client = watch_client
        self.replayed = False
        """Answered from an earlier generation (a joined retry): nothing ran here."""

    @property
    def owner(self) -> str:
        return self.context.owner

    @property
    def key(self) -> KeyRecord | None:
        principal = self.context.principal
        return principal.key if principal is not None else None

    @property
    def link_base(self) -> str:
        return str(self.http.base_url)

    def deadline(self) -> Deadline:
        """The request's own deadline from now (``timeout_ms``, else the default)."""
        settings = self.state.runtime.settings
        return Deadline.after((self.image_request.timeout_ms or settings.default_timeout_ms) / 1000)

    def mark(self, name: bytes, value: bytes) -> None:
        """A header of the answer, if it has not started yet (streams may have)."""
        marks = self.context.marks
        marks[:] = [(n, v) for n, v in marks if n != name]
        marks.append((name, value))

    def unmark(self, name: bytes) -> None:
        self.context.marks[:] = [(n, v) for n, v in self.context.marks if n != name]

    # -- running ---------------------------------------------------------------------------

    async def run(
        self,
        *,
        request: ImageRequest | None = None,
        keep: KeptImages | None = None,
    ) -> ImageResponse:
        """Run ``request`` (default: the checked one) through the engine as the caller."""
        checked = request or self.image_request
        state, context = self.state, self.context
        execution = ExecutionContext(
            request_id=context.request_id,
            idempotency_scope=context.owner,
            owner=context.owner,
            cancellation=self.presence.token,
            events=self.events,
            link_base=self.link_base,
            dispatch=self.dispatch,
            keep=keep,
        )
        key = self.key
        if key is not None:  # a key's sessions live in its own namespace
            checked = scope_request_session(checked, key.id)

        async def engine() -> ImageResponse:
            return await self.watched(state.runtime.execute(checked, execution))

        keys = state.access.keys
        if key is None or keys is None:
            return await engine()
        response = await self._on_key(keys, key, checked, engine)
        return unscope_response_session(response, key.id)

    async def watched(self, work: Awaitable[T]) -> T:
        """``work``, with the client watched (unless a stream watches it): leaving tells
        :attr:`presence`, which cancels or keeps the work by its policy."""
        if not self.watch_client:
            return await work
        watcher = asyncio.create_task(watch_disconnect(self.http.receive, self.presence))
        try:
            return await work
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher

    async def _on_key(
        self,
        keys: KeyService,
        key: KeyRecord,
        request: ImageRequest,
        run: Callable[[], Awaitable[ImageResponse]],
    ) -> ImageResponse:
        """Run on an API key's quota (docs/keys.md): one charge, whose slot is waited for
        within the request's deadline; every answer carries the key's counters as last
        read. An image kept after its caller left counts once, and its usage says so."""
        settings = self.state.runtime.settings
        charge = keys.charge(
            key,
            request,
            default_provider=self.state.runtime.registry.default,
            slot_wait_s=(request.timeout_ms or settings.default_timeout_ms) / 1000,
        )
        try:
            async with charge:
                self._show_counters(keys, charge.counters)  # a stream's headers go out now
                response = await run()
                charge.record(response, kept=self.presence.kept)
        finally:
            self._show_counters(keys, charge.counters)
        return response

    async def count_replay(self, response: ImageResponse) -> None:
        """A joined retry on a key: no reservation and no charge, one usage row saying
        ``replayed`` (a store failure is logged, never the answer)."""
        keys, key = self.state.access.keys, self.key
        if keys is None or key is None:
            return
        try:
            await keys.record_replay(key, provider=response.provider, images=len(response.data))
            self._show_counters(keys, await keys.get(key.id))
        except BridgeError as error:
            logger.warning(
                "could not count a replayed answer on an API key",
                extra={"code": error.code.value, "key_prefix": key.prefix},
            )

    def _show_counters(self, keys: KeyService, record: KeyRecord | None) -> None:
        if record is not None:
            self.context.extra_headers = quota_headers(keys, record)
