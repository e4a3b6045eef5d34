"""The app-server client: one supervised child, its JSON-RPC link and typed methods.

:class:`AppServerClient` starts ``codex app-server``, performs the ``initialize`` /
``initialized`` handshake and checks health before every call. A child that died (or
whose link broke) is replaced on the *next* call — the call that was in flight gets the
error, nothing is retried — and :meth:`AppServerClient.restart_count` says how often.
Turns are exposed as :class:`ActiveTurn`: subscribed before ``turn/start`` so no event
is missed, iterated until ``turn/completed``, interruptible while still draining events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.process import (
    AppServerProcess,
    ChildProcess,
    SpawnFunction,
)
from imagebridge.providers.codex_app_server.rpc import (
    Notification,
    NotificationChannel,
    RpcConnection,
)
from imagebridge.providers.codex_app_server.server_requests import (
    ServerRequestHandler,
    answer_server_request,
)
from imagebridge.providers.codex_app_server.threads import (
    thread_resume_params,
    thread_start_params,
)

__all__ = [
    "AccountInfo",
    "ActiveTurn",
    "AppServerClient",
    "ClientInfo",
    "ModelProviderCapabilities",
    "ServerInfo",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """How the bridge introduces itself; codex sends ``name`` upstream as ``originator``."""

    name: str = "imagegen-bridge"
    title: str = "Imagegen Bridge"
    version: str = "0.3.0"


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``initialize`` answered (real codex: user agent, home, platform)."""

    user_agent: str | None
    codex_home: Path | None
    platform_os: str | None


@dataclass(frozen=True, slots=True)
class AccountInfo:
    """``account/read``, reduced to what readiness needs (never the e-mail address)."""

    signed_in: bool
    account_type: str | None
    plan_type: str | None
    requires_openai_auth: bool


@dataclass(frozen=True, slots=True)
class ModelProviderCapabilities:
    image_generation: bool
    web_search: bool


def _protocol(message: str, method: str) -> BridgeError:
    return BridgeError(ErrorCode.PROTOCOL, message, details={"rpc_method": method})


def _str_field(value: Any, key: str) -> str | None:
    if isinstance(value, Mapping):
        inner = value.get(key)
        if isinstance(inner, str) and inner:
            return inner
    return None


class ActiveTurn:
    """A started turn: its ids and the stream of its own notifications.

    Iterating yields ``item/completed``, ``error`` and finally ``turn/completed`` of this
    turn (notifications of other turns on the thread are skipped). If the link breaks
    mid-turn the error is raised with ``outcome=unknown`` — the turn may have run.
    """

    def __init__(
        self,
        connection: RpcConnection,
        channel: NotificationChannel,
        thread_id: str,
        turn_id: str,
    ) -> None:
        self._connection = connection
        self._channel = channel
        self.thread_id = thread_id
        self.turn_id = turn_id
        self.terminal: Mapping[str, Any] | None = None
        """The ``turn`` object of ``turn/completed`` once it arrived."""
        self.interrupt_sent = False

    @property
    def completed(self) -> bool:
        return self.terminal is not None

    @property
    def terminal_status(self) -> str | None:
        status = self.terminal.get("status") if self.terminal is not None else None
        return status if isinstance(status, str) else None

    def _mine(self, notification: Notification) -> bool:
        return notification.thread_id == self.thread_id and notification.turn_id == self.turn_id

    async def next_event(self) -> Notification:
        """The next notification of this turn (after ``turn/completed``: ``cancelled``)."""
        if self.completed:
            raise BridgeError(ErrorCode.CANCELLED, "the codex turn has already completed")
        while True:
            try:
                notification = await self._channel.receive()
            except BridgeError as error:
                raise self._mid_turn(error) from None
            if not self._mine(notification):
                continue
            if notification.method == "turn/completed":
                turn = notification.params.get("turn")
                self.terminal = turn if isinstance(turn, Mapping) else {}
                self._channel.close()
            return notification

    def __aiter__(self) -> AsyncIterator[Notification]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Notification]:
        while not self.completed:
            yield await self.next_event()

    async def interrupt(
        self,
        *,
        timeout: float = 2.0,
        on_event: Callable[[Notification], Awaitable[object]] | None = None,
    ) -> str | None:
        """Send ``turn/interrupt`` and wait ≤ ``timeout`` s for ``turn/completed``.

        Events keep being drained meanwhile, so a full channel cannot stall the link;
        each one is handed to ``on_event`` first (its failures are ignored), so an image
        that arrives while the interrupt is on its way is not lost. Returns the terminal
        status (``interrupted``, ``completed``, ``failed``), or ``None`` when codex did not
        confirm in time.
        """
        if self.completed:
            return self.terminal_status
        self.interrupt_sent = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        request = asyncio.create_task(
            self._connection.request(
                "turn/interrupt",
                {"threadId": self.thread_id, "turnId": self.turn_id},
                timeout=timeout,
            )
        )
        try:
            async with asyncio.timeout_at(deadline):
                while not self.completed:
                    event = await self.next_event()
                    if on_event is not None:
                        with contextlib.suppress(BridgeError):
                            await on_event(event)
        except (TimeoutError, BridgeError):
            pass
        finally:
            if not request.done():
                request.cancel()
            await asyncio.wait({request})  # never raises the request's own failure
            if not request.cancelled():
                request.exception()  # its outcome is the terminal status, not this error
        return self.terminal_status

    def close(self) -> None:
        """Stop receiving this turn's events (the turn itself is not touched)."""
        self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _mid_turn(self, error: BridgeError) -> BridgeError:
        failure = error.copy()
        failure.mark_unknown_outcome()
        failure.details["turn_started"] = True
        return failure


class AppServerClient:
    """Typed access to one supervised ``codex app-server`` (see module docstring)."""

    def __init__(
        self,
        options: AppServerOptions,
        *,
        client_info: ClientInfo | None = None,
        server_requests: ServerRequestHandler = answer_server_request,
        spawn: SpawnFunction | None = None,
    ) -> None:
        self.options = options
        self.client_info = client_info or ClientInfo()
        self._server_requests = server_requests
        self._process = AppServerProcess(options, spawn=spawn)
        self._connection: RpcConnection | None = None
        self._child: ChildProcess | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self.server_info: ServerInfo | None = None

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Spawn the child and complete the handshake; raises if either fails."""
        await self.ensure_healthy()

    async def ensure_healthy(self) -> RpcConnection:
        """The live link, replacing a dead or broken child first (after the backoff)."""
        async with self._lock:
            if self._closed:
                raise BridgeError(ErrorCode.CANCELLED, "the codex app-server client is shut down")
            connection, child = self._connection, self._child
            if connection is not None and child is not None:
                if not connection.closed and child.alive:
                    return connection
                await connection.close()
            self._connection = None
            child = await (self._process.restart() if child is not None else self._process.start())
            self._child = child
            connection = RpcConnection(
                child.stdout, child.stdin, self.options, server_requests=self._server_requests
            )
            connection.start()
            try:
                await self._handshake(connection)
            except BaseException:
                await connection.close()
                raise
            self._connection = connection
            return connection

    async def _handshake(self, connection: RpcConnection) -> None:
        result = await connection.request(
            "initialize",
            {
                "clientInfo": {
                    "name": self.client_info.name,
                    "title": self.client_info.title,
                    "version": self.client_info.version,
                },
                "capabilities": {
                    "experimentalApi": False,
                    "requestAttestation": False,
                    "mcpServerOpenaiFormElicitation": False,
                },
            },
        )
        home = _str_field(result, "codexHome")
        self.server_info = ServerInfo(
            user_agent=_str_field(result, "userAgent"),
            codex_home=Path(home) if home and Path(home).is_absolute() else None,
            platform_os=_str_field(result, "platformOs"),
        )
        await connection.notify("initialized")

    def restart_count(self) -> int:
        return self._process.restart_count

    @property
    def generation(self) -> int:
        return self._process.generation

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    @property
    def spawned_pids(self) -> list[int]:
        return list(self._process.spawned_pids)

    @property
    def codex_home(self) -> Path | None:
        """Where codex keeps its state: its own answer, else the configured or inherited one."""
        if self.server_info is not None and self.server_info.codex_home is not None:
            return self.server_info.codex_home
        if self.options.codex_home is not None:
            return self.options.codex_home
        configured = self.options.env.get("CODEX_HOME")
        return Path(configured) if configured else None

    def stderr_tail(self, max_bytes: int = 2048) -> str:
        """The redacted end of the current child's stderr — for logs only, never clients."""
        return self._child.stderr_tail.tail(max_bytes) if self._child is not None else ""

    async def shutdown(self) -> None:
        """Fail pending calls with ``cancelled`` and stop the child (bounded)."""
        async with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close(
                BridgeError(ErrorCode.CANCELLED, "the codex app-server client is shutting down")
            )
        await self._process.shutdown()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    # -- generic ---------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        side_effecting: bool | None = None,
        restart: bool = True,
    ) -> Any:
        """One request on the live link. ``restart=False`` never spawns a new child: a
        clean-up call meant for the child that ran a turn fails instead (``upstream``)."""
        connection = await self.ensure_healthy() if restart else self._live_connection(method)
        return await connection.request(
            method, params, timeout=timeout, side_effecting=side_effecting
        )

    def _live_connection(self, method: str) -> RpcConnection:
        connection, child = self._connection, self._child
        if (
            self._closed
            or connection is None
            or connection.closed
            or child is None
            or not child.alive
        ):
            raise BridgeError(
                ErrorCode.UPSTREAM,
                "the codex app-server is not running",
                details={"rpc_method": method},
            )
        return connection

    # -- typed methods -------------------------------------------------------------

    async def read_account(self, *, timeout: float | None = None) -> AccountInfo:
        result = await self.request("account/read", {}, timeout=timeout)
        if not isinstance(result, Mapping):
            raise _protocol("codex answered account/read without an object", "account/read")
        account = result.get("account")
        return AccountInfo(
            signed_in=isinstance(account, Mapping),
            account_type=_str_field(account, "type"),
            plan_type=_str_field(account, "planType"),
            requires_openai_auth=result.get("requiresOpenaiAuth") is True,
        )

    async def read_capabilities(self, *, timeout: float | None = None) -> ModelProviderCapabilities:
        method = "modelProvider/capabilities/read"
        result = await self.request(method, {}, timeout=timeout)
        if not isinstance(result, Mapping):
            raise _protocol("codex answered capabilities/read without an object", method)
        return ModelProviderCapabilities(
            image_generation=result.get("imageGeneration") is True,
            web_search=result.get("webSearch") is True,
        )

    async def check_ready(self, *, timeout: float | None = None) -> AccountInfo:
        """Readiness: signed in (else ``authentication``) and image generation available."""
        account = await self.read_account(timeout=timeout)
        if not account.signed_in:
            raise BridgeError(
                ErrorCode.AUTHENTICATION,
                "codex is not signed in to a ChatGPT account",
                suggestions=["Run `codex login` as the user the bridge runs as."],
            )
        capabilities = await self.read_capabilities(timeout=timeout)
        if not capabilities.image_generation:
            raise BridgeError(
                ErrorCode.UNSUPPORTED_CAPABILITY,
                "codex reports that image generation is not available for this account",
            )
        return account

    async def start_thread(
        self,
        *,
        cwd: Path,
        ephemeral: bool,
        model: str | None = None,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> str:
        """``thread/start`` (bridge defaults, overridable by ``params``); the thread id."""
        body = thread_start_params(cwd=cwd, ephemeral=ephemeral, model=model)
        body.update(params or {})
        result = await self.request("thread/start", body, timeout=timeout)
        thread_id = _str_field(result.get("thread") if isinstance(result, Mapping) else None, "id")
        if thread_id is None:
            raise _protocol("codex answered thread/start without a thread id", "thread/start")
        return thread_id

    async def resume_thread(self, thread_id: str, *, timeout: float | None = None) -> None:
        await self.request("thread/resume", thread_resume_params(thread_id), timeout=timeout)

    async def archive_thread(
        self, thread_id: str, *, timeout: float | None = None, restart: bool = True
    ) -> None:
        await self.request(
            "thread/archive", {"threadId": thread_id}, timeout=timeout, restart=restart
        )

    async def start_turn(
        self,
        thread_id: str,
        input_items: Sequence[Mapping[str, Any]],
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> ActiveTurn:
        """Subscribe to the thread, then ``turn/start``; the caller must close the turn."""
        connection = await self.ensure_healthy()
        channel = connection.subscribe(thread_id=thread_id)
        body: dict[str, Any] = {"threadId": thread_id, "input": [dict(i) for i in input_items]}
        body.update(params or {})
        try:
            result = await connection.request("turn/start", body, timeout=timeout)
            turn_id = _str_field(result.get("turn") if isinstance(result, Mapping) else None, "id")
            if turn_id is None:
                raise _protocol(
                    "codex answered turn/start without a turn id", "turn/start"
                ).mark_unknown_outcome()
        except BaseException:
            channel.close()
            raise
        return ActiveTurn(connection, channel, thread_id, turn_id)
