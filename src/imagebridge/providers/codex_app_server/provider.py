"""The ``codex-app-server`` provider: one image per codex turn, threads per session mode.

Each call runs one turn on a codex thread chosen by the request's session mode:

* ``isolated`` — a fresh ephemeral thread, archived after the turn (best effort);
* ``persistent`` — the thread bound to ``session.key`` in the SQLite session store,
  resumed (``reused: true``), or a new durable thread whose binding is stored;
* ``thread`` — the caller's thread id, resumed.

Turns on one session run one at a time (lock key: session key, else thread id, else the
request id); waiting for the session honours the deadline and cancellation. Input images,
loaded and verified by the engine, are staged as files codex can read. The image is
captured from the turn's notifications; once it is in, the request is answered and a turn
that runs on is interrupted in the background. On a deadline or a cancellation the turn is
interrupted before the error is returned.

The child process starts lazily (first readiness probe or request) and a dead child is
replaced on the next call; the call that saw it die gets an ``unknown`` outcome.

With an account pool (:mod:`.accounts`) each account has its own child; a call runs on
the account the pool picks, a persistent session on the account it is bound to. An
isolated call refused at the door (the login, or the plan's quota before any image)
moves to the next account; a session's call never does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from imagebridge._version import __version__
from imagebridge.contract.accounts import DEFAULT_ACCOUNT
from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.enums import Operation, SessionMode
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import ProgressEvent, StartedEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import (
    ImageResponse,
    SessionMetadata,
    Timings,
)
from imagebridge.engine.inputs import LoadedImage
from imagebridge.engine.interruption import wait_unless_interrupted
from imagebridge.engine.provider import AccountCounters, Provider, ProviderContext, inline_image
from imagebridge.engine.sessions import SessionBindings
from imagebridge.imaging.inspect import ImageLimits, inspect_image
from imagebridge.providers.codex.auth import load_codex_credentials_async
from imagebridge.providers.codex.pool import (
    AccountLease,
    AccountPool,
    AccountSpec,
    Tried,
    record_failover,
)
from imagebridge.providers.codex_app_server.accounts import (
    AccountClients,
    decode_binding,
    encode_binding,
)
from imagebridge.providers.codex_app_server.capabilities import (
    DEFAULT_IMAGE_MODEL,
    MAX_INPUT_BYTES_EACH,
    MAX_INPUT_BYTES_TOTAL,
    PROVIDER_NAME,
    app_server_capabilities,
)
from imagebridge.providers.codex_app_server.client import ActiveTurn, AppServerClient
from imagebridge.providers.codex_app_server.images import (
    CaptureLimits,
    TurnImageCollector,
    TurnImages,
)
from imagebridge.providers.codex_app_server.notifications import Notification
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.partials import PartialImageForwarder
from imagebridge.providers.codex_app_server.session_locks import SessionLease, SessionLocks
from imagebridge.providers.codex_app_server.staging import StagedBatch, StagingArea
from imagebridge.providers.codex_app_server.threads import turn_prompt_text, turn_start_params
from imagebridge.providers.codex_app_server.turn_cleanup import TurnCleanup

__all__ = [
    "AppServerProviderSettings",
    "CodexAppServerProvider",
    "SessionStoreOpener",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
SessionStoreOpener = Callable[[], Awaitable[SessionBindings]]
"""Opens the session store on first use (opening SQLite is asynchronous)."""

_INTERRUPTED_STATUSES = frozenset({"interrupted", "failed"})
_MAX_THREAD_HOMES = 4096


@dataclass(slots=True)
class _Progress:
    """How far one call on one account got (whether it may move to another account)."""

    turn_started: bool = False


@dataclass(frozen=True, slots=True)
class AppServerProviderSettings:
    """Provider-level settings on top of the transport's :class:`AppServerOptions`."""

    codex_model: str | None = None
    """Passed to ``thread/start`` as ``model`` and, when set, the advertised model name."""
    image_limits: ImageLimits = field(default_factory=ImageLimits)
    """``artifacts.image``: bounds for captured images."""
    readiness_timeout_ms: int = 10_000
    interrupt_timeout_ms: int = 2_000
    """How long ``turn/interrupt`` waits for codex to confirm the turn is over."""
    archive_timeout_ms: int = 2_000
    """Grace for archiving an isolated thread (best effort, after the answer)."""
    max_revised_prompt_bytes: int = 128 * 1024
    staging_max_total_bytes: int = MAX_INPUT_BYTES_TOTAL
    staging_max_file_bytes: int = MAX_INPUT_BYTES_EACH
    staging_sweep_age_seconds: float = 3600.0
    """Staging folders older than this that a crash left behind are removed on first use."""

    def __post_init__(self) -> None:
        for name in ("readiness_timeout_ms", "interrupt_timeout_ms", "archive_timeout_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 600_000:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    f"codex app-server {name} must be an integer from 1 to 600000",
                )
        if self.codex_model is not None and not self.codex_model.strip():
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "providers.codex_app_server.codex_model must not be blank",
                details={"field": "providers.codex_app_server.codex_model"},
            )

    @property
    def model(self) -> str:
        return self.codex_model or DEFAULT_IMAGE_MODEL


class CodexAppServerProvider(Provider):
    """Image generation through a supervised ``codex app-server`` child."""

    def __init__(
        self,
        options: AppServerOptions,
        session_store: SessionBindings | SessionStoreOpener,
        *,
        staging_root: Path,
        settings: AppServerProviderSettings | None = None,
        client: AppServerClient | None = None,
        pool: AccountPool | None = None,
    ) -> None:
        self.options = options
        self.settings = settings or AppServerProviderSettings()
        self._client = client or AppServerClient(options)
        if pool is None:
            home = partial(load_codex_credentials_async, options.codex_home)
            pool = AccountPool.single(AccountSpec(DEFAULT_ACCOUNT, home))
        self.pool = pool
        """The accounts this provider's turns run on (shared with the HTTP transports)."""
        self._clients = AccountClients(options, pool, self._client, PROVIDER_NAME)
        self._thread_homes: OrderedDict[str, str] = OrderedDict()
        """Thread id → the account whose child created or resumed it (this process)."""
        if callable(session_store):
            self._store: SessionBindings | None = None
            self._open_store: SessionStoreOpener | None = session_store
        else:
            self._store = session_store
            self._open_store = None
        self._store_lock = asyncio.Lock()
        self._staging = StagingArea(
            staging_root,
            max_total_bytes=self.settings.staging_max_total_bytes,
            max_file_bytes=self.settings.staging_max_file_bytes,
        )
        self._swept = False
        self._locks = SessionLocks()
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self._descriptor = ProviderDescriptor(
            name=PROVIDER_NAME,
            display_name="Codex app-server",
            version=__version__,
            experimental=False,
            models=[self.settings.model],
        )

    # -- identity and discovery ----------------------------------------------------------

    @property
    def descriptor(self) -> ProviderDescriptor:
        return self._descriptor

    @property
    def model(self) -> str:
        return self.settings.model

    @property
    def client(self) -> AppServerClient:
        """The (first) account's child."""
        return self._clients.default

    @property
    def clients(self) -> list[AppServerClient]:
        """Every child made so far (one per account that was used)."""
        return self._clients.started()

    @property
    def staging_root(self) -> Path:
        return self._staging.root

    async def capabilities(self, model: str | None) -> ProviderCapabilities:
        self._check_model(model)
        return app_server_capabilities(self.model)

    def _check_model(self, model: str | None) -> None:
        if model is not None and model != self.model:
            raise self._unserved_model(model, [self.model])

    async def check_ready(self) -> None:
        """Signed in and image generation available (``account/read`` + capabilities).

        Each call is bounded by ``rpc_timeout_ms``, the whole probe (including a first
        spawn and handshake) by ``readiness_timeout_ms``. With a pool every served
        account's child is probed; one ready account makes the provider ready, and an
        account whose login codex refuses is skipped for the refusal cooldown.
        """
        if not self.pool.explicit:
            await self._probe(self._client)
            return
        accounts = self._clients.served()
        if not accounts:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "No pool account has a codex home for codex-app-server (own logins are "
                "not given to a codex child).",
                provider=self.name,
                suggestions=("Add an account with codex_home to [accounts.pool].",),
            )
        results = await asyncio.gather(
            *(self._probe(self._clients.for_account(a)) for a in accounts),
            return_exceptions=True,
        )
        failures: list[BridgeError] = []
        for account, result in zip(accounts, results, strict=True):
            if isinstance(result, BridgeError):
                self.pool.login_failed(account, result, read=False)
                failures.append(result)
            elif isinstance(result, BaseException):
                raise result
        if len(failures) == len(accounts):
            raise failures[0]

    async def _probe(self, client: AppServerClient) -> None:
        budget = self.settings.readiness_timeout_ms / 1000
        try:
            async with asyncio.timeout(budget):
                await client.check_ready()
        except TimeoutError:
            raise BridgeError(
                ErrorCode.TIMEOUT,
                "codex app-server did not answer the readiness probe in time",
                retryable=True,
                provider=self.name,
                details={"timeout_ms": self.settings.readiness_timeout_ms},
            ) from None
        except BridgeError as error:
            raise error.with_provider(self.name) from None

    def restart_count(self) -> int:
        return sum(client.restart_count() for client in self._clients.started())

    def account_counters(self) -> list[AccountCounters]:
        """With a pool, each account's counters (the metrics' ``account`` label)."""
        return self.pool.counters(self.name) if self.pool.explicit else []

    async def diagnostics(self) -> dict[str, Any]:
        """With a pool, every account as this transport sees it (no quota of its own)."""
        if not self.pool.explicit:
            return {"provider": self.name}
        return {"provider": self.name, "accounts": self.pool.describe(self.name)}

    # -- sessions ------------------------------------------------------------------------

    async def _sessions(self) -> SessionBindings:
        if self._store is not None:
            return self._store
        async with self._store_lock:
            if self._store is None:
                assert self._open_store is not None
                self._store = await self._open_store()
            return self._store

    async def get_session(self, key: str) -> SessionMetadata:
        bound = await (await self._sessions()).get(key)
        if bound is None:
            raise _session_not_found(self.name)
        _, thread_id = decode_binding(bound)
        return SessionMetadata(key=key, thread_id=thread_id, reused=True)

    async def delete_session(self, key: str) -> None:
        if not await (await self._sessions()).delete(key):
            raise _session_not_found(self.name)

    # -- lifecycle -----------------------------------------------------------------------

    async def settle(self, timeout: float | None = None) -> None:
        """Wait (≤ ``timeout`` s) for background clean-ups: interrupts, archives, staging."""
        pending = set(self._background)
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    async def shutdown(self) -> None:
        """Finish clean-ups (bounded), stop the child (bounded), close an opened store."""
        self._closed = True
        bound = (self.settings.interrupt_timeout_ms + self.settings.archive_timeout_ms) / 1000
        await self.settle(bound + 1.0)
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        try:
            for client in self._clients.started():
                await client.shutdown()
        finally:
            if self._open_store is not None and self._store is not None:
                store, self._store = self._store, None
                await store.close()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        async def guarded() -> None:
            try:
                await work
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("codex app-server clean-up failed")

        task = asyncio.create_task(guarded(), name="codex-app-server-cleanup")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- execution -----------------------------------------------------------------------

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        started = time.monotonic()
        if self._closed:
            raise BridgeError(
                ErrorCode.CANCELLED,
                "the codex app-server provider is shut down",
                provider=self.name,
            )
        if request.parameters.n != 1:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "codex app-server makes one image per turn; fan-out must split the request",
                provider=self.name,
            )
        self._check_model(request.routing.model)
        await context.emit(StartedEvent())
        if not self._swept:
            self._swept = True
            try:
                await self._staging.sweep(
                    older_than_seconds=self.settings.staging_sweep_age_seconds
                )
            except OSError as error:  # housekeeping only: never fails a request
                logger.warning("could not sweep the codex staging folder (errno %s)", error.errno)
        if not self.pool.explicit:
            return await self._execute_on(self._client, request, context, started, _Progress())
        return await self._execute_pooled(request, context, started)

    async def _execute_on(
        self,
        client: AppServerClient,
        request: ImageRequest,
        context: ProviderContext,
        started: float,
        progress: _Progress,
        account: str | None = None,
    ) -> ImageResponse:
        """One call on one account's child, with its clean-up."""
        cleanup = TurnCleanup(
            client=client,
            batch=self._staging.batch(),
            interrupt_timeout=self.settings.interrupt_timeout_ms / 1000,
            archive_timeout=self.settings.archive_timeout_ms / 1000,
        )
        try:
            return await self._execute(request, context, cleanup, started, progress, account)
        except BridgeError as error:
            raise error.with_provider(self.name) from None
        finally:
            cleanup.release_if_idle()
            self._spawn(cleanup.run())

    async def _execute_pooled(
        self, request: ImageRequest, context: ProviderContext, started: float
    ) -> ImageResponse:
        """Pick the account (a session's own one), run there; an isolated call refused at
        the door moves to the next account."""
        home = await self._home_of(request, context)
        movable = home is None and request.session.mode is SessionMode.ISOLATED
        tried: list[Tried] = []
        while True:
            lease = await self._lease(context, home, tried)
            began = time.monotonic()
            progress = _Progress()
            client = self._clients.for_account(lease.account)
            try:
                response = await self._execute_on(
                    client, request, context, started, progress, lease.name
                )
            except BridgeError as error:
                refusal = lease.failed(error, answered=progress.turn_started, output_seen=False)
                if refusal is not None and movable:
                    elapsed = int((time.monotonic() - began) * 1000)
                    tried.append(Tried(lease.name, error, refusal, elapsed))
                    continue
                error.details["account"] = lease.name
                raise
            except BaseException:
                lease.abandon()
                raise
            else:
                lease.succeeded()
                if tried:
                    record_failover(response, tried, lease.name)
                return response
            finally:
                lease.release()

    async def _lease(
        self,
        context: ProviderContext,
        home: str | None,
        tried: list[Tried],
    ) -> AccountLease:
        try:
            return await self.pool.acquire(
                self.name,
                deadline=context.deadline,
                cancellation=context.cancellation,
                tried=tried,
                only=home,
            )
        except BridgeError as error:
            if home is not None and error.code is not ErrorCode.SESSION:
                error.details["session_account"] = home
            raise

    async def _home_of(self, request: ImageRequest, context: ProviderContext) -> str | None:
        """The account a session's call must run on (``None``: any, as the pool picks)."""
        options = request.session
        if options.mode is SessionMode.PERSISTENT and options.key is not None:
            bound = await (await self._sessions()).get(options.key)
            return None if bound is None else decode_binding(bound)[0]
        if options.mode is SessionMode.THREAD and options.thread_id is not None:
            return await self._thread_home(options.thread_id, context)
        return None

    async def _thread_home(self, thread_id: str, context: ProviderContext) -> str:
        """The account whose codex home holds ``thread_id``: known from this process, else
        found by asking each account's child to resume it (only its home can)."""
        known = self._thread_homes.get(thread_id)
        if known is not None:
            return known
        for account in self._clients.served():
            client = self._clients.for_account(account)
            try:
                await self._resume(thread_id, context, persistent_key=None, client=client)
            except BridgeError as error:
                if error.code is ErrorCode.SESSION:
                    continue
                raise
            self._remember_thread(thread_id, account.name)
            return account.name
        raise BridgeError(
            ErrorCode.SESSION,
            "No account of the pool has this codex thread.",
            details={"session_mode": "thread"},
            suggestions=["Check the thread id, or use a persistent session instead."],
        )

    def _remember_thread(self, thread_id: str, account: str) -> None:
        self._thread_homes[thread_id] = account
        self._thread_homes.move_to_end(thread_id)
        while len(self._thread_homes) > _MAX_THREAD_HOMES:
            self._thread_homes.popitem(last=False)

    async def _execute(
        self,
        request: ImageRequest,
        context: ProviderContext,
        cleanup: TurnCleanup,
        started: float,
        progress: _Progress,
        account: str | None,
    ) -> ImageResponse:
        client = cleanup.client
        paths, edit_sources = await self._stage_inputs(request, context, cleanup.batch)
        lock_key = _lock_key(request, context)
        if self._locks.held(lock_key):
            await context.emit(ProgressEvent(stage="waiting_for_session"))
        cleanup.lease = await self._locks.acquire(
            [lock_key], context.deadline, context.cancellation
        )
        await context.emit(ProgressEvent(stage="preparing_session"))
        session = await self._open_thread(request, context, cleanup.lease, client, account)
        assert session.thread_id is not None
        thread_id = session.thread_id
        if request.session.mode is SessionMode.ISOLATED:
            cleanup.archive_thread_id = thread_id
        text = turn_prompt_text(
            request.prompt, reference_paths=paths, edit_source_count=edit_sources
        )
        items = turn_start_params(thread_id, text, paths)["input"]
        _raise_if_interrupted(context, "before the codex turn started")
        # turn/start is side-effecting: it is not raced against cancellation (its answer
        # carries the turn id needed to interrupt); its own timeout bounds it.
        progress.turn_started = True
        turn = await client.start_turn(thread_id, items, timeout=self._rpc_budget(context))
        cleanup.turn = turn
        await context.emit(ProgressEvent(stage="generating"))
        captured = await self._collect(turn, request, context, client)
        cleanup.stop_turn_now()  # the image is in: codex need not go on
        return await self._response(request, context, captured, session, started)

    # -- inputs --------------------------------------------------------------------------

    async def _stage_inputs(
        self, request: ImageRequest, context: ProviderContext, batch: StagedBatch
    ) -> tuple[list[Path], int]:
        """Edit sources first, then references, each staged as a file (order kept)."""
        loaded = context.inputs.require_for(request, self.name)
        sources: list[tuple[str, LoadedImage]] = []
        if request.operation is Operation.EDIT:
            sources.extend((f"images[{i}]", image) for i, image in enumerate(loaded.images))
        edit_sources = len(sources)
        sources.extend(
            (f"reference_images[{i}]", image) for i, image in enumerate(loaded.reference_images)
        )
        paths: list[Path] = []
        for name, image in sources:
            _raise_if_interrupted(context, "while staging input images")
            try:
                paths.append(await batch.add(image.data, media_type=image.info.media_type))
            except BridgeError as error:
                if error.code is ErrorCode.INPUT:
                    error.details.setdefault("field", name)
                raise
        return paths, edit_sources

    # -- threads -------------------------------------------------------------------------

    def _thread_cwd(self) -> Path:
        return (self.options.cwd or Path.cwd()).absolute()

    async def _open_thread(
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
            store = await self._sessions()
            bound = await store.get(options.key)
            if bound is not None:
                owner, thread_id = decode_binding(bound)
                self._check_home(owner, account)
                # Also hold the thread itself, so an explicit-thread request for the same
                # thread cannot run a turn alongside (session key first: no lock cycle).
                await lease.extend(
                    _thread_lock_key(thread_id), context.deadline, context.cancellation
                )
                await self._resume(thread_id, context, persistent_key=options.key, client=client)
                return SessionMetadata(key=options.key, thread_id=thread_id, reused=True)
            thread_id = await self._start_thread(context, client, ephemeral=False)
            stored = thread_id if account is None else encode_binding(account, thread_id)
            await store.put(options.key, stored)
            self._note_thread(thread_id, account)
            return SessionMetadata(key=options.key, thread_id=thread_id, reused=False)
        if options.mode is SessionMode.THREAD:
            assert options.thread_id is not None
            known = account is not None and self._thread_homes.get(options.thread_id) == account
            if not known:  # with a pool, finding its home has already resumed it
                await self._resume(options.thread_id, context, persistent_key=None, client=client)
            self._note_thread(options.thread_id, account)
            return SessionMetadata(thread_id=options.thread_id, reused=True)
        thread_id = await self._start_thread(context, client, ephemeral=True)
        return SessionMetadata(thread_id=thread_id, reused=False)

    def _check_home(self, owner: str, account: str | None) -> None:
        """A persistent session runs on the account it is bound to, never elsewhere."""
        if owner == (account if account is not None else DEFAULT_ACCOUNT):
            return
        raise BridgeError(
            ErrorCode.SESSION,
            f"The session is bound to the account '{owner}', which cannot serve it here.",
            details={"session_account": owner, "reason": "session_bound_elsewhere"},
            suggestions=("Delete the session to start over on another account.",),
        )

    def _note_thread(self, thread_id: str, account: str | None) -> None:
        if account is not None:
            self._remember_thread(thread_id, account)

    async def _start_thread(
        self, context: ProviderContext, client: AppServerClient, *, ephemeral: bool
    ) -> str:
        return await self._interruptible(
            client.start_thread(
                cwd=self._thread_cwd(),
                ephemeral=ephemeral,
                model=self.settings.codex_model,
                timeout=self._rpc_budget(context),
            ),
            context,
            "while starting a codex thread",
        )

    async def _resume(
        self,
        thread_id: str,
        context: ProviderContext,
        *,
        persistent_key: str | None,
        client: AppServerClient,
    ) -> None:
        try:
            await self._interruptible(
                client.resume_thread(thread_id, timeout=self._rpc_budget(context)),
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

    # -- the turn ------------------------------------------------------------------------

    async def _collect(
        self,
        turn: ActiveTurn,
        request: ImageRequest,
        context: ProviderContext,
        client: AppServerClient,
    ) -> TurnImages:
        """The turn's image, or the classified failure; interrupts on deadline or cancel."""
        limits = self.settings.image_limits
        collector = TurnImageCollector(
            thread_id=turn.thread_id,
            turn_id=turn.turn_id,
            expected_images=1,
            codex_home=client.codex_home,
            limits=CaptureLimits(
                max_encoded_bytes=limits.max_encoded_bytes,
                max_revised_prompt_bytes=self.settings.max_revised_prompt_bytes,
            ),
        )
        partials = PartialImageForwarder(
            context, wanted=request.parameters.partial_images, max_bytes=limits.max_encoded_bytes
        )
        drain = asyncio.ensure_future(_drain(turn, collector, partials))
        if await wait_unless_interrupted(drain, context.cancellation, context.deadline.remaining()):
            return drain.result()
        drain.cancel()
        with contextlib.suppress(asyncio.CancelledError, BridgeError):
            await drain
        cancelled = context.cancellation.cancelled
        status = await turn.interrupt(
            timeout=self.settings.interrupt_timeout_ms / 1000, on_event=collector.feed
        )
        if collector.images:
            return collector.result()  # it arrived while the interrupt was on its way
        raise _interrupted(cancelled=cancelled, status=status)

    async def _response(
        self,
        request: ImageRequest,
        context: ProviderContext,
        captured: TurnImages,
        session: SessionMetadata,
        started: float,
    ) -> ImageResponse:
        image = captured.images[0]
        try:
            info = await asyncio.to_thread(inspect_image, image.data, self.settings.image_limits)
        except BridgeError as error:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "codex returned an image that failed verification",
                details={"reason": error.message, "image_source": image.source},
            ).mark_unknown_outcome() from None
        encoded = await asyncio.to_thread(lambda: base64.b64encode(image.data).decode("ascii"))
        elapsed = int((time.monotonic() - started) * 1000)
        params = request.parameters
        return ImageResponse(
            id=context.request_id,
            created=int(time.time()),
            provider=self.name,
            model=self.model,
            requested=params.model_copy(deep=True),
            effective=params.model_copy(deep=True),
            data=[inline_image(0, encoded, info, generation_ms=elapsed)],
            revised_prompt=image.revised_prompt,
            session=session,
            timings=Timings(provider_ms=elapsed, total_ms=elapsed),
        )

    # -- deadline and cancellation -------------------------------------------------------

    def _rpc_budget(self, context: ProviderContext) -> float:
        """A call's timeout: the configured RPC timeout, cut to the request's deadline."""
        return max(0.001, min(self.options.rpc_timeout, context.deadline.remaining()))

    async def _interruptible(
        self, awaitable: Awaitable[T], context: ProviderContext, stage: str
    ) -> T:
        """Await a step that changes nothing upstream, abandoning it on cancel or deadline."""
        _raise_if_interrupted(context, stage)
        task = asyncio.ensure_future(awaitable)
        if await wait_unless_interrupted(task, context.cancellation, context.deadline.remaining()):
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, BridgeError):
            await task
        if context.cancellation.cancelled:
            raise BridgeError(ErrorCode.CANCELLED, f"request was cancelled {stage}")
        raise _timed_out(stage)


# -- helpers ---------------------------------------------------------------------------------


async def _drain(
    turn: ActiveTurn, collector: TurnImageCollector, partials: PartialImageForwarder
) -> TurnImages:
    """Feed the turn's events to the collector until the image is in or the turn ends."""
    async for notification in _events(turn):
        await partials.offer(notification)
        try:
            over = await collector.feed(notification)
        except BridgeError as error:
            # The image (or what claims to be one) was produced upstream: whatever went
            # wrong while taking it over, the generation may have counted.
            raise error.mark_unknown_outcome() from None
        if over or collector.complete:
            break
    return collector.result()


async def _events(turn: ActiveTurn) -> AsyncIterator[Notification]:
    while not turn.completed:
        yield await turn.next_event()


def _lock_key(request: ImageRequest, context: ProviderContext) -> str:
    options = request.session
    if options.mode is SessionMode.PERSISTENT and options.key is not None:
        return f"session:{options.key}"
    if options.mode is SessionMode.THREAD and options.thread_id is not None:
        return _thread_lock_key(options.thread_id)
    return f"request:{context.request_id}"


def _thread_lock_key(thread_id: str) -> str:
    return f"thread:{thread_id}"


def _raise_if_interrupted(context: ProviderContext, stage: str) -> None:
    if context.cancellation.cancelled:
        raise BridgeError(ErrorCode.CANCELLED, f"request was cancelled {stage}")
    if context.deadline.expired:
        raise _timed_out(stage)


def _timed_out(stage: str) -> BridgeError:
    return BridgeError(ErrorCode.TIMEOUT, f"request deadline elapsed {stage}", retryable=True)


def _interrupted(*, cancelled: bool, status: str | None) -> BridgeError:
    """After ``turn/interrupt``: a confirmed stop is a cancelled outcome, else unknown."""
    if cancelled:
        error = BridgeError(
            ErrorCode.CANCELLED, "request was cancelled; the codex turn was interrupted"
        )
    else:
        error = BridgeError(
            ErrorCode.TIMEOUT,
            "request deadline elapsed during the codex turn; the turn was interrupted",
            retryable=True,
        )
    if status in _INTERRUPTED_STATUSES:
        error.details["outcome"] = "cancelled"
        error.details["terminal_status"] = status
    else:
        error.mark_unknown_outcome()
        error.details["terminal_status"] = status or "unconfirmed"
    return error


def _session_not_found(provider: str) -> BridgeError:
    return BridgeError(ErrorCode.SESSION, "persistent session was not found", provider=provider)
