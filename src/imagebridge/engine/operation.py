"""One logical request in flight, and how each of its stages runs under its limits.

Every stage of a request races three things: the request's deadline, the caller's
cancellation and the runtime's shutdown. A stage before dispatch (or after the provider
returned) is *controlled*: an interruption there is a clean, retryable failure. The
provider call is different: once dispatched, an interruption leaves the upstream outcome
unknown, and the error says so. Either way the stage gets the cancellation grace to stop
on its own before its task is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.inputs import LoadedInputs
from imagebridge.engine.keep import KeptImages, ProviderDispatch
from imagebridge.engine.provider import EventSink

__all__ = ["Operation", "StageGuard", "elapsed_ms"]

logger = logging.getLogger("imagebridge.engine")

T = TypeVar("T")


def elapsed_ms(started: float) -> int:
    """Whole milliseconds since ``started`` (a ``time.monotonic()`` reading), never negative."""
    return max(0, int((time.monotonic() - started) * 1000))


@dataclass(slots=True)
class Operation:
    """A request's identity, limits and tokens while it runs."""

    request_id: str
    deadline: Deadline
    token: CancelToken
    """Cancelled when the operation must stop (propagates to the provider)."""
    external: CancelToken
    """The caller's cancellation."""
    events: EventSink | None
    owner: str
    inputs: LoadedInputs = field(default_factory=LoadedInputs)
    """Set once, after global admission and before the first route."""
    link_base: str | None = None
    dispatch: ProviderDispatch | None = None
    """Told when the first provider call begins."""
    keep: KeptImages | None = None
    """Where every output's kept artifact is recorded (``None``: keep nothing extra)."""


class StageGuard:
    """Runs a request's stages under its deadline, its cancellation and ``shutdown``."""

    def __init__(self, shutdown: CancelToken, cancellation_grace_ms: int) -> None:
        self._shutdown = shutdown
        self._grace_s = cancellation_grace_ms / 1000

    def delivery_deadline(self, op: Operation) -> Deadline:
        """Paid-for images are delivered even when the provider finished inside the grace."""
        return Deadline(max(op.deadline.at, asyncio.get_running_loop().time() + self._grace_s))

    def _interruption(self, op: Operation) -> tuple[asyncio.Future[str], Callable[[], None]]:
        """A future resolved with ``cancelled`` or ``shutdown`` when either happens."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def resolve(reason: str) -> None:
            if not future.done():
                future.set_result(reason)

        unlink_external = op.external.on_cancel(lambda: resolve("cancelled"))
        unlink_shutdown = self._shutdown.on_cancel(lambda: resolve("shutdown"))

        def dispose() -> None:
            unlink_external()
            unlink_shutdown()
            if not future.done():
                future.cancel()

        return future, dispose

    async def _race(
        self, task: asyncio.Task[T], op: Operation, deadline: Deadline
    ) -> tuple[str | None, asyncio.Task[T]]:
        """Wait for ``task``, the deadline or an interruption; returns the interruption."""
        interruption, dispose = self._interruption(op)
        try:
            watched: set[asyncio.Future[Any]] = {task, interruption}
            await asyncio.wait(
                watched, timeout=deadline.remaining(), return_when=asyncio.FIRST_COMPLETED
            )
        except BaseException:
            task.cancel()
            raise
        finally:
            reason = (
                interruption.result()
                if interruption.done() and not interruption.cancelled()
                else None
            )
            dispose()
        if task.done():
            return None, task
        return reason or "deadline", task

    async def _grace(self, task: asyncio.Task[T]) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait({task}, timeout=self._grace_s)
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def controlled(
        self,
        awaitable: Awaitable[T],
        op: Operation,
        message: str,
        deadline: Deadline | None = None,
    ) -> T:
        """A pre-dispatch (or post-provider) stage: its timeouts are retryable, not ambiguous."""
        deadline = deadline or op.deadline
        if deadline.expired:
            op.token.cancel("deadline")
            _close(awaitable)
            raise BridgeError(ErrorCode.TIMEOUT, "request deadline elapsed", retryable=True)
        task = asyncio.ensure_future(awaitable)
        reason, task = await self._race(task, op, deadline)
        if reason is None:
            try:
                return task.result()
            except BridgeError:
                raise
            except Exception as exc:
                logger.exception("unexpected failure in %s", message)
                raise BridgeError(ErrorCode.INTERNAL, "internal error") from exc
        op.token.cancel(reason)
        await self._grace(task)
        if reason == "cancelled":
            raise BridgeError(ErrorCode.CANCELLED, message)
        if reason == "shutdown":
            raise BridgeError(ErrorCode.CANCELLED, "runtime is shutting down")
        raise BridgeError(ErrorCode.TIMEOUT, "request deadline elapsed", retryable=True)

    async def provider_call(
        self, awaitable: Coroutine[Any, Any, ImageResponse], op: Operation
    ) -> ImageResponse:
        """Provider execution: after dispatch, every interruption is an unknown outcome."""
        if op.deadline.expired:
            op.token.cancel("deadline")
            awaitable.close()
            raise BridgeError(ErrorCode.TIMEOUT, "request deadline elapsed", retryable=True)
        task = asyncio.ensure_future(awaitable)
        reason, task = await self._race(task, op, op.deadline)
        if reason is not None:
            op.token.cancel(reason)
            await self._grace(task)
            stopped: BridgeError | None = None
            if task.done() and not task.cancelled():
                error = task.exception()
                if error is None:
                    return task.result()
                if isinstance(error, BridgeError):
                    if error.code not in (ErrorCode.TIMEOUT, ErrorCode.CANCELLED):
                        raise error
                    stopped = error
            if reason == "cancelled":
                message, code = (
                    "request was cancelled during provider execution",
                    ErrorCode.CANCELLED,
                )
            elif reason == "shutdown":
                message, code = "runtime shut down during provider execution", ErrorCode.CANCELLED
            else:
                message, code = (
                    "request deadline elapsed during provider execution",
                    ErrorCode.TIMEOUT,
                )
            raise _interrupted(code, message, stopped).mark_unknown_outcome()
        try:
            return task.result()
        except BridgeError as error:
            if error.code in (ErrorCode.TIMEOUT, ErrorCode.CANCELLED):
                error.mark_unknown_outcome()
            raise
        except Exception as exc:
            logger.exception("provider raised an unexpected exception")
            raise BridgeError(
                ErrorCode.INTERNAL, "provider failed unexpectedly"
            ).mark_unknown_outcome() from exc


def _interrupted(code: ErrorCode, message: str, stopped: BridgeError | None) -> BridgeError:
    """The interruption's error, keeping what the provider said about where its call ran
    (``details.account``, ``provider_attempts``, the upstream request id): a deadline on
    a pool account names the account like any other failure that stays on it."""
    error = BridgeError(code, message)
    if stopped is not None:
        error.provider = stopped.provider
        error.upstream_request_id = stopped.upstream_request_id
        error.details.update(stopped.details)
    return error


def _close(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()
