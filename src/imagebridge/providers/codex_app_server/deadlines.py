"""The provider's steps under the request's deadline and cancellation.

A step that changes nothing upstream (starting or resuming a thread, staging inputs) is
raced against the request's cancellation and deadline and abandoned when either wins;
each JSON-RPC call is also bounded by the configured RPC timeout, cut to the deadline.
Side-effecting steps (``turn/start``) are not raced: they only check beforehand.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.interruption import wait_unless_interrupted
from imagebridge.engine.provider import ProviderContext

__all__ = ["interruptible", "raise_if_interrupted", "rpc_budget", "timed_out"]

T = TypeVar("T")


def rpc_budget(rpc_timeout: float, context: ProviderContext) -> float:
    """A call's timeout: the configured RPC timeout, cut to the request's deadline."""
    return max(0.001, min(rpc_timeout, context.deadline.remaining()))


async def interruptible(awaitable: Awaitable[T], context: ProviderContext, stage: str) -> T:
    """Await a step that changes nothing upstream, abandoning it on cancel or deadline."""
    raise_if_interrupted(context, stage)
    task = asyncio.ensure_future(awaitable)
    if await wait_unless_interrupted(task, context.cancellation, context.deadline.remaining()):
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, BridgeError):
        await task
    if context.cancellation.cancelled:
        raise BridgeError(ErrorCode.CANCELLED, f"request was cancelled {stage}")
    raise timed_out(stage)


def raise_if_interrupted(context: ProviderContext, stage: str) -> None:
    """Fail with ``cancelled`` or ``timeout`` if the request already is (``stage``: where)."""
    if context.cancellation.cancelled:
        raise BridgeError(ErrorCode.CANCELLED, f"request was cancelled {stage}")
    if context.deadline.expired:
        raise timed_out(stage)


def timed_out(stage: str) -> BridgeError:
    return BridgeError(ErrorCode.TIMEOUT, f"request deadline elapsed {stage}", retryable=True)
