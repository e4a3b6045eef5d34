"""Admission gates, and the behaviours the original's admission.rs tests check."""

from __future__ import annotations

import asyncio

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.engine.admission import AdmissionGate
from imagebridge.engine.cancellation import CancelToken, Deadline


async def test_rejects_waiters_beyond_the_bounded_queue() -> None:
    gate = AdmissionGate("global", 1, 1)
    holder = await gate.acquire(Deadline.after(5), CancelToken())
    waiter = asyncio.ensure_future(gate.acquire(Deadline.after(5), CancelToken()))
    await asyncio.sleep(0)
    assert gate.queued == 1
    with pytest.raises(BridgeError) as caught:
        await gate.acquire(Deadline.after(5), CancelToken())
    assert caught.value.code is ErrorCode.OVERLOADED
    assert caught.value.retryable is True
    assert caught.value.details == {"limit": "global", "retry_after_ms": 1000}
    holder.release()
    permit = await waiter
    assert gate.queued == 0
    permit.release()
    assert gate.active == 0


async def test_cancellation_releases_a_queue_slot() -> None:
    gate = AdmissionGate("provider:mock", 1, 1)
    holder = await gate.acquire(Deadline.after(5), CancelToken())
    token = CancelToken()
    waiter = asyncio.ensure_future(gate.acquire(Deadline.after(5), token))
    await asyncio.sleep(0)
    token.cancel()
    with pytest.raises(BridgeError) as caught:
        await waiter
    assert caught.value.code is ErrorCode.CANCELLED
    assert gate.queued == 0
    holder.release()


async def test_unlimited_gate_admits_independent_calls_without_queueing() -> None:
    gate = AdmissionGate("global", None, None)
    permits = [await gate.acquire(Deadline.after(5), CancelToken()) for _ in range(8)]
    assert gate.queued == 0 and gate.active == 8
    for permit in permits:
        permit.release()


async def test_deadline_while_queued_is_a_retryable_timeout() -> None:
    gate = AdmissionGate("global", 1, None)
    holder = await gate.acquire(Deadline.after(5), CancelToken())
    with pytest.raises(BridgeError) as caught:
        await gate.acquire(Deadline.after(0.02), CancelToken())
    assert caught.value.code is ErrorCode.TIMEOUT and caught.value.retryable
    assert gate.queued == 0
    holder.release()


async def test_zero_queue_fails_fast_and_close_fails_waiters() -> None:
    gate = AdmissionGate("global", 1, 0)
    holder = await gate.acquire(Deadline.after(5), CancelToken())
    with pytest.raises(BridgeError) as rejected:
        await gate.acquire(Deadline.after(5), CancelToken())
    assert rejected.value.code is ErrorCode.OVERLOADED and gate.queued == 0
    open_gate = AdmissionGate("global", 1, None)
    held = await open_gate.acquire(Deadline.after(5), CancelToken())
    waiter = asyncio.ensure_future(open_gate.acquire(Deadline.after(5), CancelToken()))
    await asyncio.sleep(0)
    open_gate.close()
    with pytest.raises(BridgeError) as caught:
        await waiter
    assert caught.value.message == "runtime is shutting down"
    held.release()
    holder.release()


async def test_fifo_order_is_kept() -> None:
    gate = AdmissionGate("global", 1, None)
    holder = await gate.acquire(Deadline.after(5), CancelToken())
    order: list[int] = []

    async def take(i: int) -> None:
        permit = await gate.acquire(Deadline.after(5), CancelToken())
        order.append(i)
        permit.release()

    tasks = [asyncio.ensure_future(take(i)) for i in range(5)]
    await asyncio.sleep(0)
    holder.release()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]


async def test_task_cancellation_never_leaks_a_permit() -> None:
    gate = AdmissionGate("global", 1, None)
    holder = await gate.acquire(Deadline.after(5), CancelToken())
    waiter = asyncio.ensure_future(gate.acquire(Deadline.after(5), CancelToken()))
    await asyncio.sleep(0)
    holder.release()  # grants the waiter ...
    waiter.cancel()  # ... which leaves before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert gate.active == 0 and gate.queued == 0


async def test_rejection_tells_the_caller_when_to_retry() -> None:
    gate = AdmissionGate("provider:mock", 1, 0, retry_after_ms=2500)
    holder = await gate.acquire(Deadline.after(5), CancelToken())
    with pytest.raises(BridgeError) as caught:
        await gate.acquire(Deadline.after(5), CancelToken())
    assert caught.value.details == {"limit": "provider:mock", "retry_after_ms": 2500}
    holder.release()
    with pytest.raises(BridgeError) as invalid:
        AdmissionGate("global", 1, 0, retry_after_ms=-1)
    assert invalid.value.code is ErrorCode.CONFIGURATION
