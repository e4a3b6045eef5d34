"""Capture one turn's image, interrupting the turn on the request's deadline or cancel.

The turn's notifications are fed to a :class:`TurnImageCollector` (and in-progress
previews to the :class:`PartialImageForwarder`) until the image is in or the turn ends.
When the deadline passes or the request is cancelled first, the turn is interrupted; an
image that arrives while the interrupt is on its way still counts, otherwise the error
says whether codex confirmed the stop (a ``cancelled`` outcome) or not (``unknown``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.interruption import wait_unless_interrupted
from imagebridge.engine.provider import ProviderContext
from imagebridge.providers.codex_app_server.client import ActiveTurn
from imagebridge.providers.codex_app_server.images import TurnImageCollector, TurnImages
from imagebridge.providers.codex_app_server.notifications import Notification
from imagebridge.providers.codex_app_server.partials import PartialImageForwarder

__all__ = ["capture_turn_image", "turn_interrupted"]

_INTERRUPTED_STATUSES = frozenset({"interrupted", "failed"})


async def capture_turn_image(
    turn: ActiveTurn,
    collector: TurnImageCollector,
    partials: PartialImageForwarder,
    context: ProviderContext,
    *,
    interrupt_timeout: float,
) -> TurnImages:
    """The turn's image, or the classified failure; interrupts on deadline or cancel."""
    drain = asyncio.ensure_future(_drain(turn, collector, partials))
    if await wait_unless_interrupted(drain, context.cancellation, context.deadline.remaining()):
        return drain.result()
    drain.cancel()
    with contextlib.suppress(asyncio.CancelledError, BridgeError):
        await drain
    cancelled = context.cancellation.cancelled
    status = await turn.interrupt(timeout=interrupt_timeout, on_event=collector.feed)
    if collector.images:
        return collector.result()  # it arrived while the interrupt was on its way
    raise turn_interrupted(cancelled=cancelled, status=status)


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


def turn_interrupted(*, cancelled: bool, status: str | None) -> BridgeError:
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
