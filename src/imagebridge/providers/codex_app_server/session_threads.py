"""The codex thread each call runs on, and the persistent sessions' stored bindings.

The request's session mode picks the thread: ``isolated`` starts a fresh ephemeral one,
``persistent`` resumes the thread bound to ``session.key`` (or starts a durable one and
stores the binding; with a pool the binding names the account, :mod:`.accounts`),
``thread`` resumes the caller's thread. The session store opens on first use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from imagebridge.contract.enums import SessionMode
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import SessionMetadata
from imagebridge.engine.provider import ProviderContext
from imagebridge.engine.sessions import SessionBindings
from imagebridge.providers.codex_app_server.accounts import (
    ThreadHomes,
    check_home,
    decode_binding,
    encode_binding,
)
from imagebridge.providers.codex_app_server.client import AppServerClient
from imagebridge.providers.codex_app_server.deadlines import interruptible, rpc_budget
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.session_locks import SessionLease

__all__ = ["SessionStoreOpener", "SessionThreads", "lock_key"]

SessionStoreOpener = Callable[[], Awaitable[SessionBindings]]
"""Opens the session store on first use (opening SQLite is asynchronous)."""


class SessionThreads:
    """Opens each call's thread and reads, writes and deletes session bindings."""

    def __init__(
        self,
        options: AppServerOptions,
        session_store: SessionBindings | SessionStoreOpener,
        homes: ThreadHomes,
        *,
        codex_model: str | None,
        provider: str,
    ) -> None:
        self._options = options
        self._homes = homes
        self._codex_model = codex_model
        self._provider = provider
        if callable(session_store):
            self._store: SessionBindings | None = None
            self._open_store: SessionStoreOpener | None = session_store
        else:
            self._store = session_store
            self._open_store = None
        self._store_lock = asyncio.Lock()

    # -- the session store ---------------------------------------------------------------

    async def bindings(self) -> SessionBindings:
        if self._store is not None:
            return self._store
        async with self._store_lock:
            if self._store is None:
                assert self._open_store is not None
                self._store = await self._open_store()
            return self._store

    async def get(self, key: str) -> SessionMetadata:
        bound = await (await self.bindings()).get(key)
        if bound is None:
            raise _session_not_found(self._provider)
        _, thread_id = decode_binding(bound)
        return SessionMetadata(key=key, thread_id=thread_id, reused=True)

    async def delete(self, key: str) -> None:
        if not await (await self.bindings()).delete(key):
            raise _session_not_found(self._provider)

    async def close(self) -> None:
        """Close the store if this object opened it."""
        if self._open_store is not None and self._store is not None:
            store, self._store = self._store, None
            await store.close()

    # -- threads -------------------------------------------------------------------------

    def _thread_cwd(self) -> Path:
        return (self._options.cwd or Path.cwd()).absolute()

    async def open(
        self,
        request: ImageRequest,
        context: ProviderContext,
        lease: SessionLease,
        client: AppServerClient,
        account: str | None,
    ) -> SessionMetadata:
        """The thread of the call; ``account`` is set with a pool (bindings then name it)."""
        options = request.session
        if options.mode is SessionMode.PERSISTENT:
            assert options.key is not None
            store = await self.bindings()
            bound = await store.get(options.key)
            if bound is not None:
                owner, thread_id = decode_binding(bound)
                check_home(owner, account)
                # Also hold the thread itself, so an explicit-thread request for the same
                # thread cannot run a turn alongside (session key first: no lock cycle).
                await lease.extend(
                    _thread_lock_key(thread_id), context.deadline, context.cancellation
                )
                await self.resume(thread_id, context, persistent_key=options.key, client=client)
                return SessionMetadata(key=options.key, thread_id=thread_id, reused=True)
            thread_id = await self._start_thread(context, client, ephemeral=False)
            stored = thread_id if account is None else encode_binding(account, thread_id)
            await store.put(options.key, stored)
            self._homes.note(thread_id, account)
            return SessionMetadata(key=options.key, thread_id=thread_id, reused=False)
        if options.mode is SessionMode.THREAD:
            assert options.thread_id is not None
            # With a pool, finding the thread's home has already resumed it.
            if not self._homes.knows(options.thread_id, account):
                await self.resume(options.thread_id, context, persistent_key=None, client=client)
            self._homes.note(options.thread_id, account)
            return SessionMetadata(thread_id=options.thread_id, reused=True)
        thread_id = await self._start_thread(context, client, ephemeral=True)
        return SessionMetadata(thread_id=thread_id, reused=False)

    async def _start_thread(
        self, context: ProviderContext, client: AppServerClient, *, ephemeral: bool
    ) -> str:
        return await interruptible(
            client.start_thread(
                cwd=self._thread_cwd(),
                ephemeral=ephemeral,
                model=self._codex_model,
                timeout=rpc_budget(self._options.rpc_timeout, context),
            ),
            context,
            "while starting a codex thread",
        )

    async def resume_explicit(
        self, thread_id: str, context: ProviderContext, client: AppServerClient
    ) -> None:
        """Resume a caller's thread (``session`` error: this child does not have it)."""
        await self.resume(thread_id, context, persistent_key=None, client=client)

    async def resume(
        self,
        thread_id: str,
        context: ProviderContext,
        *,
        persistent_key: str | None,
        client: AppServerClient,
    ) -> None:
        try:
            await interruptible(
                client.resume_thread(
                    thread_id, timeout=rpc_budget(self._options.rpc_timeout, context)
                ),
                context,
                "while resuming the codex thread",
            )
        except BridgeError as error:
            if error.code is not ErrorCode.UPSTREAM or "rpc_code" not in error.details:
                raise
            # codex answered with an error: it does not know (or cannot load) the thread.
            suggestions = (
                ["Delete the session to start over with a new thread."]
                if persistent_key is not None
                else ["Check the thread id, or use a persistent session instead."]
            )
            raise BridgeError(
                ErrorCode.SESSION,
                "codex could not resume the session's thread",
                details={
                    "rpc_code": error.details["rpc_code"],
                    "session_mode": "persistent" if persistent_key is not None else "thread",
                },
                suggestions=suggestions,
            ) from None


def lock_key(request: ImageRequest, context: ProviderContext) -> str:
    """What a call's turn is serialised on: its session key, else thread, else request."""
    options = request.session
    if options.mode is SessionMode.PERSISTENT and options.key is not None:
        return f"session:{options.key}"
    if options.mode is SessionMode.THREAD and options.thread_id is not None:
        return _thread_lock_key(options.thread_id)
    return f"request:{context.request_id}"


def _thread_lock_key(thread_id: str) -> str:
    return f"thread:{thread_id}"


def _session_not_found(provider: str) -> BridgeError:
    return BridgeError(ErrorCode.SESSION, "persistent session was not found", provider=provider)
