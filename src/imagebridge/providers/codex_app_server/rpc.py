"""JSON-RPC "lite" over JSONL with codex: requests, notifications and server requests.

One :class:`RpcConnection` per child. A single reader task parses every line with the
size limits of :class:`~imagebridge.providers.codex_app_server.options.AppServerOptions`
(an oversize line, malformed JSON or a non-object closes the link with ``protocol``: the
child is then considered broken and replaced), completes pending requests by id, answers
server→client requests at once, and routes turn notifications to bounded
:class:`NotificationChannel` subscribers. When the link closes every pending request and
every channel fails with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server.framing import LineReader, LineTooLong, encode_message
from imagebridge.providers.codex_app_server.notifications import Notification, NotificationChannel
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.server_requests import (
    ServerReply,
    ServerRequestHandler,
    answer_server_request,
)

__all__ = [
    "SIDE_EFFECTING_METHODS",
    "TURN_EVENT_METHODS",
    "LineSink",
    "Notification",
    "NotificationChannel",
    "RpcConnection",
    "rpc_error_to_bridge",
]

logger = logging.getLogger(__name__)

SIDE_EFFECTING_METHODS = frozenset({"turn/start", "turn/interrupt", "thread/archive"})
"""Requests that may have acted even when their answer is lost: never retried."""

TURN_EVENT_METHODS = frozenset({"item/completed", "turn/completed", "error"})
"""Notifications a turn consumer needs; deltas and status chatter are not routed."""

_PARSE_IN_THREAD_BYTES = 256 * 1024
_SAFETY_WORDS = ("safety", "content_policy", "moderation", "refusal")
_SAFE_CODE = re.compile(r"[^A-Za-z0-9_./-]")


class LineSink(Protocol):
    """The writing half of the link (an :class:`asyncio.StreamWriter` fits)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    def is_closing(self) -> bool: ...


@dataclass(slots=True)
class _Pending:
    method: str
    future: asyncio.Future[Any]
    side_effecting: bool
    sent: bool = False


class _WriteFailed(Exception):
    def __init__(self, *, attempted: bool) -> None:
        super().__init__("write failed")
        self.attempted = attempted


class _Broken(Exception):
    def __init__(self, error: BridgeError) -> None:
        super().__init__(error.message)
        self.error = error


class RpcConnection:
    """Requests, notifications and server requests over one JSONL stdio link."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: LineSink,
        options: AppServerOptions,
        *,
        server_requests: ServerRequestHandler = answer_server_request,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._options = options
        self._server_requests = server_requests
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._channels: list[NotificationChannel] = []
        self._write_lock = asyncio.Lock()
        self._reply_tasks: set[asyncio.Task[None]] = set()
        self._reader_task: asyncio.Task[None] | None = None
        self._close_error: BridgeError | None = None
        self.server_requests_answered: dict[str, int] = {}
        """Server request methods answered so far, with counts (diagnostics)."""
        self.notifications_received = 0

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        if self._reader_task is None:
            self._reader_task = asyncio.create_task(self._read_loop(), name="codex-rpc-reader")

    @property
    def closed(self) -> bool:
        return self._close_error is not None

    @property
    def close_error(self) -> BridgeError | None:
        return self._close_error

    async def close(self, error: BridgeError | None = None) -> None:
        """Close the link: fail what is pending, stop the reader, close the writer."""
        self._mark_closed(
            error or BridgeError(ErrorCode.CANCELLED, "the codex app-server link was closed")
        )
        task = self._reader_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for reply in list(self._reply_tasks):
            reply.cancel()
        if self._reply_tasks:
            await asyncio.gather(*self._reply_tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            if not self._writer.is_closing():
                self._writer.close()

    # -- outgoing --------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        side_effecting: bool | None = None,
    ) -> Any:
        """Send a request and return its ``result`` (``None`` when absent).

        ``timeout`` defaults to ``rpc_timeout_ms``. Failures are :class:`BridgeError`;
        for side-effecting methods (``turn/start``, ``turn/interrupt``,
        ``thread/archive``) any failure after sending is ``retryable=false`` with
        ``outcome=unknown``. Cancellation propagates as :class:`asyncio.CancelledError`.
        """
        if side_effecting is None:
            side_effecting = method in SIDE_EFFECTING_METHODS
        if self._close_error is not None:
            raise self._closed_error_for(method, side_effecting=side_effecting, sent=False)
        rpc_id = next(self._ids)
        payload = self._encode({"method": method, "id": rpc_id, "params": dict(params or {})})
        limit = timeout if timeout is not None else self._options.rpc_timeout
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        pending = _Pending(method, future, side_effecting)
        self._pending[rpc_id] = pending
        try:
            async with asyncio.timeout(limit):
                try:
                    await self._send(payload)
                except _WriteFailed as failed:
                    pending.sent = failed.attempted
                    raise self._closed_error_for(
                        method, side_effecting=side_effecting, sent=failed.attempted, rpc_id=rpc_id
                    ) from None
                pending.sent = True
                return await future
        except TimeoutError:
            error = BridgeError(
                ErrorCode.TIMEOUT,
                f"codex app-server did not answer {method} in time",
                retryable=not side_effecting,
                details={"rpc_method": method, "timeout_ms": round(limit * 1000)},
            )
            if side_effecting:
                _mark_sent_unknown(error, rpc_id)
            raise error from None
        finally:
            self._pending.pop(rpc_id, None)
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved: it was reported another way

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification (no answer expected)."""
        if self._close_error is not None:
            raise self._closed_error_for(method, side_effecting=False, sent=False)
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            await self._send(self._encode(message))
        except _WriteFailed:
            raise self._closed_error_for(method, side_effecting=False, sent=False) from None

    def subscribe(
        self,
        *,
        thread_id: str | None = None,
        methods: Iterable[str] = TURN_EVENT_METHODS,
        capacity: int | None = None,
    ) -> NotificationChannel:
        """A bounded channel receiving ``methods`` notifications (of ``thread_id`` if set).

        Subscribe *before* the request that starts the events, so none is missed.
        """
        wanted = frozenset(methods)

        def accept(notification: Notification) -> bool:
            if notification.method not in wanted:
                return False
            return thread_id is None or notification.thread_id == thread_id

        channel = NotificationChannel(
            capacity or self._options.notification_capacity,
            accept,
            slow_consumer_timeout=self._options.slow_consumer_timeout,
        )
        if self._close_error is not None:
            channel.fail(self._close_error.copy())
        else:
            self._channels.append(channel)
        return channel

    def _encode(self, message: dict[str, Any]) -> bytes:
        method = str(message.get("method", "response"))
        try:
            payload = encode_message(message)
        except (TypeError, ValueError):
            raise BridgeError(
                ErrorCode.INTERNAL,
                f"the {method} message to codex app-server is not valid JSON",
                details={"rpc_method": method},
            ) from None
        if len(payload) - 1 > self._options.rpc_max_message_bytes:
            raise BridgeError(
                ErrorCode.INVALID_REQUEST,
                f"the {method} message exceeds the codex app-server message limit",
                details={
                    "rpc_method": method,
                    "message_bytes": len(payload) - 1,
                    "limit_bytes": self._options.rpc_max_message_bytes,
                },
            )
        return payload

    async def _send(self, payload: bytes) -> None:
        """Write one line; :class:`_WriteFailed` says whether bytes may have left."""
        async with self._write_lock:
            if self._close_error is not None:
                raise _WriteFailed(attempted=False)
            try:
                self._writer.write(payload)
                await self._writer.drain()
            except (ConnectionError, RuntimeError, OSError):
                self._mark_closed(
                    BridgeError(
                        ErrorCode.UPSTREAM,
                        "codex app-server stopped reading its input",
                        retryable=True,
                    )
                )
                raise _WriteFailed(attempted=True) from None

    # -- incoming --------------------------------------------------------------------

    async def _read_loop(self) -> None:
        lines = LineReader(self._reader, self._options.rpc_max_message_bytes)
        try:
            while True:
                line = await lines.readline()
                if line is None:
                    self._mark_closed(
                        BridgeError(
                            ErrorCode.UPSTREAM,
                            "codex app-server exited or closed its output",
                            retryable=True,
                        )
                    )
                    return
                if line.strip():
                    await self._dispatch(line)
        except LineTooLong as too_long:
            self._mark_closed(
                BridgeError(
                    ErrorCode.PROTOCOL,
                    "codex app-server sent a message larger than the configured limit",
                    details={
                        "message_bytes_at_least": too_long.size,
                        "limit_bytes": too_long.limit,
                    },
                )
            )
        except _Broken as broken:
            self._mark_closed(broken.error)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("codex app-server reader failed")
            self._mark_closed(
                BridgeError(ErrorCode.INTERNAL, "the codex app-server reader failed unexpectedly")
            )

    async def _dispatch(self, line: bytes) -> None:
        try:
            # Image-carrying lines run to tens of MiB: parse those off the event loop.
            if len(line) > _PARSE_IN_THREAD_BYTES:
                message = await asyncio.to_thread(json.loads, line)
            else:
                message = json.loads(line)
        except ValueError:
            raise _Broken(
                BridgeError(
                    ErrorCode.PROTOCOL,
                    "codex app-server sent a line that is not valid JSON",
                    details={"line_bytes": len(line)},
                )
            ) from None
        if not isinstance(message, dict):
            raise _Broken(
                BridgeError(
                    ErrorCode.PROTOCOL,
                    "codex app-server sent a JSON value that is not an object",
                    details={"line_bytes": len(line)},
                )
            )
        method = message.get("method")
        rpc_id = message.get("id")
        if rpc_id is not None and method is None:
            self._complete(rpc_id, message)
        elif rpc_id is not None and isinstance(method, str):
            self._answer(rpc_id, method, message.get("params"))
        elif rpc_id is None and isinstance(method, str):
            if len(line) > self._options.rpc_max_notification_bytes:
                raise _Broken(
                    BridgeError(
                        ErrorCode.PROTOCOL,
                        "codex app-server sent a notification larger than the configured limit",
                        details={
                            "rpc_method": _safe_code(method),
                            "message_bytes": len(line),
                            "limit_bytes": self._options.rpc_max_notification_bytes,
                        },
                    )
                )
            params = message.get("params")
            await self._route(
                Notification(method, params if isinstance(params, dict) else {}, len(line))
            )
        else:
            raise _Broken(
                BridgeError(
                    ErrorCode.PROTOCOL,
                    "codex app-server sent a message with neither a method nor an id",
                )
            )

    def _complete(self, rpc_id: Any, message: Mapping[str, Any]) -> None:
        if isinstance(rpc_id, bool) or not isinstance(rpc_id, int):
            logger.debug("ignoring a response with a foreign id type")
            return
        pending = self._pending.get(rpc_id)
        if pending is None or pending.future.done():
            logger.debug("ignoring a response to unknown or finished request %s", rpc_id)
            return
        if "error" in message and message["error"] is not None:
            pending.future.set_exception(
                rpc_error_to_bridge(message["error"], method=pending.method)
            )
        else:
            pending.future.set_result(message.get("result"))

    def _answer(self, rpc_id: Any, method: str, params: Any) -> None:
        if isinstance(rpc_id, bool) or not isinstance(rpc_id, int | str):
            raise _Broken(BridgeError(ErrorCode.PROTOCOL, "codex app-server sent an invalid id"))
        try:
            reply = self._server_requests(method, params if isinstance(params, dict) else {})
        except Exception:
            logger.exception("server request handler failed for %s", _safe_code(method))
            reply = ServerReply(error_code=-32603, error_message="internal error in the bridge")
        key = _safe_code(method)
        self.server_requests_answered[key] = self.server_requests_answered.get(key, 0) + 1
        logger.info(
            "answered codex server request %s with %s",
            key,
            "an error" if reply.is_error else "a decline",
        )
        task = asyncio.create_task(self._send_reply(reply.to_message(rpc_id)))
        self._reply_tasks.add(task)
        task.add_done_callback(self._reply_tasks.discard)

    async def _send_reply(self, message: dict[str, Any]) -> None:
        # A reply is best-effort: if the link is gone, there is nobody left to answer.
        with contextlib.suppress(BridgeError, _WriteFailed):
            await self._send(self._encode(message))

    async def _route(self, notification: Notification) -> None:
        self.notifications_received += 1
        delivered = False
        for channel in list(self._channels):
            if channel.closed:
                self._channels.remove(channel)
            elif channel.accepts(notification):
                delivered = await channel.deliver(notification) or delivered
        if delivered:
            # Let consumers run before the next line is parsed (the stream may hold many).
            await asyncio.sleep(0)

    # -- closing ---------------------------------------------------------------------

    def _mark_closed(self, error: BridgeError) -> None:
        if self._close_error is not None:
            return
        self._close_error = error
        if error.code is not ErrorCode.CANCELLED:
            logger.warning("codex app-server link closed: %s", error.message)
        for rpc_id, pending in list(self._pending.items()):
            if not pending.future.done():
                pending.future.set_exception(
                    self._closed_error_for(
                        pending.method,
                        side_effecting=pending.side_effecting,
                        sent=pending.sent,
                        rpc_id=rpc_id,
                    )
                )
        for channel in self._channels:
            channel.fail(error.copy())
        self._channels.clear()

    def _closed_error_for(
        self, method: str, *, side_effecting: bool, sent: bool, rpc_id: int | None = None
    ) -> BridgeError:
        assert self._close_error is not None
        error = self._close_error.copy().with_detail("rpc_method", method)
        if side_effecting and sent:
            _mark_sent_unknown(error, rpc_id)
        return error


def _mark_sent_unknown(error: BridgeError, rpc_id: int | None) -> None:
    error.mark_unknown_outcome()
    error.details["request_sent"] = True
    if rpc_id is not None:
        error.details["rpc_id"] = rpc_id


def _safe_code(value: str) -> str:
    return _SAFE_CODE.sub("", value[:64])


def rpc_error_to_bridge(error: Any, *, method: str) -> BridgeError:
    """Map a JSON-RPC error object to a :class:`BridgeError` without echoing its message.

    An error answer is a definite refusal, so even side-effecting methods keep a known
    outcome here (nothing was done).
    """
    code: int | str = "invalid"
    if isinstance(error, Mapping):
        raw = error.get("code")
        if isinstance(raw, int) and not isinstance(raw, bool):
            code = raw
        elif isinstance(raw, str) and _safe_code(raw):
            code = _safe_code(raw)
    details: dict[str, Any] = {"rpc_method": method, "rpc_code": code}
    if isinstance(code, str) and any(word in code.lower() for word in _SAFETY_WORDS):
        result = BridgeError.safety_rejected(
            f"codex app-server refused {method} under its content policy", **details
        )
    else:
        result = BridgeError(
            ErrorCode.UPSTREAM, f"codex app-server rejected {method}", details=details
        )
    return result
