"""The ``codex-app-server`` provider: one image per codex turn, threads per session mode.

Each call runs one turn on a codex thread chosen by the request's session mode:

* ``isolated`` — a fresh ephemeral thread, archived after the turn (best effort);
* ``persistent`` — the thread bound to ``session.key`` in the SQLite session store,
  resumed (``reused: true``), or a new durable thread whose binding is stored;
* ``thread`` — the caller's thread id, resumed.

:mod:`.session_threads` opens the thread and keeps the session bindings.

Turns on one session run one at a time (lock key: session key, else thread id, else the
request id); waiting for the session honours the deadline and cancellation. Input images,
loaded and verified by the engine, are staged as files codex can read. The image is
captured from the turn's notifications; once it is in, the request is answered and a turn
that runs on is interrupted in the background. On a deadline or a cancellation the turn is
interrupted before the error is returned (:mod:`.capture`; the other steps race the
deadline through :mod:`.deadlines`).

The child process starts lazily (first readiness probe or request) and a dead child is
replaced on the next call; the call that saw it die gets an ``unknown`` outcome.

With an account pool each account has its own child; a call runs on the account the pool
picks, a persistent session on the account it is bound to. An isolated call refused at
the door (the login, or the plan's quota before any image) moves to the next account; a
session's call never does (:class:`~.accounts.AccountRouter`).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

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
from imagebridge.engine.provider import AccountCounters, Provider, ProviderContext, inline_image
from imagebridge.engine.sessions import SessionBindings
from imagebridge.imaging.inspect import ImageLimits, inspect_image
from imagebridge.providers.codex.auth import load_codex_credentials_async
from imagebridge.providers.codex.pool import AccountPool, AccountSpec
from imagebridge.providers.codex_app_server.accounts import (
    AccountClients,
    AccountRouter,
    CallProgress,
    ThreadHomes,
)
from imagebridge.providers.codex_app_server.capabilities import (
    DEFAULT_IMAGE_MODEL,
    MAX_INPUT_BYTES_EACH,
    MAX_INPUT_BYTES_TOTAL,
    PROVIDER_NAME,
    app_server_capabilities,
)
from imagebridge.providers.codex_app_server.capture import capture_turn_image
from imagebridge.providers.codex_app_server.client import ActiveTurn, AppServerClient
from imagebridge.providers.codex_app_server.deadlines import raise_if_interrupted, rpc_budget
from imagebridge.providers.codex_app_server.images import (
    CaptureLimits,
    TurnImageCollector,
    TurnImages,
)
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.partials import PartialImageForwarder
from imagebridge.providers.codex_app_server.session_locks import SessionLocks
from imagebridge.providers.codex_app_server.session_threads import (
    SessionStoreOpener,
    SessionThreads,
    lock_key,
)
from imagebridge.providers.codex_app_server.staging import StagedBatch, StagingArea
from imagebridge.providers.codex_app_server.threads import turn_prompt_text, turn_start_params
from imagebridge.providers.codex_app_server.turn_cleanup import TurnCleanup

__all__ = [
    "AppServerProviderSettings",
    "CodexAppServerProvider",
    "SessionStoreOpener",
]

logger = logging.getLogger(__name__)


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
        homes = ThreadHomes()
        self._threads = SessionThreads(
            options,
            session_store,
            homes,
            codex_model=self.settings.codex_model,
            provider=PROVIDER_NAME,
        )
        self._router = AccountRouter(
            self._clients,
            PROVIDER_NAME,
            homes,
            sessions=self._threads.bindings,
            resume=self._threads.resume_explicit,
        )
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

    async def get_session(self, key: str) -> SessionMetadata:
        return await self._threads.get(key)

    async def delete_session(self, key: str) -> None:
        await self._threads.delete(key)

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
            await self._threads.close()

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
            return await self._execute_on(self._client, request, context, started, CallProgress())
        return await self._router.execute(
            request,
            context,
            lambda client, progress, account: self._execute_on(
                client, request, context, started, progress, account
            ),
        )

    async def _execute_on(
        self,
        client: AppServerClient,
        request: ImageRequest,
        context: ProviderContext,
        started: float,
        progress: CallProgress,
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

    async def _execute(
        self,
        request: ImageRequest,
        context: ProviderContext,
        cleanup: TurnCleanup,
        started: float,
        progress: CallProgress,
        account: str | None,
    ) -> ImageResponse:
        client = cleanup.client
        paths, edit_sources = await self._stage_inputs(request, context, cleanup.batch)
        key = lock_key(request, context)
        if self._locks.held(key):
            await context.emit(ProgressEvent(stage="waiting_for_session"))
        cleanup.lease = await self._locks.acquire([key], context.deadline, context.cancellation)
        await context.emit(ProgressEvent(stage="preparing_session"))
        session = await self._threads.open(request, context, cleanup.lease, client, account)
        assert session.thread_id is not None
        thread_id = session.thread_id
        if request.session.mode is SessionMode.ISOLATED:
            cleanup.archive_thread_id = thread_id
        text = turn_prompt_text(
            request.prompt, reference_paths=paths, edit_source_count=edit_sources
        )
        items = turn_start_params(thread_id, text, paths)["input"]
        raise_if_interrupted(context, "before the codex turn started")
        # turn/start is side-effecting: it is not raced against cancellation (its answer
        # carries the turn id needed to interrupt); its own timeout bounds it.
        progress.turn_started = True
        turn = await client.start_turn(
            thread_id, items, timeout=rpc_budget(self.options.rpc_timeout, context)
        )
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
            raise_if_interrupted(context, "while staging input images")
            try:
                paths.append(await batch.add(image.data, media_type=image.info.media_type))
            except BridgeError as error:
                if error.code is ErrorCode.INPUT:
                    error.details.setdefault("field", name)
                raise
        return paths, edit_sources

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
        return await capture_turn_image(
            turn,
            collector,
            partials,
            context,
            interrupt_timeout=self.settings.interrupt_timeout_ms / 1000,
        )

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
