"""Keyed session locks: order, bounded waits, cancellation and bookkeeping."""

from __future__ import annotations

import asyncio

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.providers.codex_app_server.session_locks import SessionLocks


async def test_a_second_holder_of_a_key_waits_for_the_first() -> None:
    locks = SessionLocks()
    first = await locks.acquire(["session:a"], Deadline.after(5), CancelToken())
    second = asyncio.ensure_future(locks.acquire(["session:a"], Deadline.after(5), CancelToken()))
    await asyncio.sleep(0.02)
    assert not second.done()
    first.release()
    lease = await asyncio.wait_for(second, 1)
    assert lease.keys == ("session:a",)
    lease.release()
    assert len(locks) == 0  # nothing held, nothing remembered


async def test_different_keys_do_not_wait_for_each_other() -> None:
    locks = SessionLocks()
    one = await locks.acquire(["session:a"], Deadline.after(5), CancelToken())
    two = await asyncio.wait_for(locks.acquire(["session:b"], Deadline.after(5), CancelToken()), 1)
    assert locks.held("session:a") and locks.held("session:b")
    one.release()
    two.release()


async def test_waiting_past_the_deadline_is_a_retryable_timeout() -> None:
    locks = SessionLocks()
    held = await locks.acquire(["k"], Deadline.after(5), CancelToken())
    with pytest.raises(BridgeError) as caught:
        await locks.acquire(["k"], Deadline.after(0.05), CancelToken())
    assert caught.value.code is ErrorCode.TIMEOUT and caught.value.retryable
    assert caught.value.message == "request timed out while waiting for the session"
    held.release()
    assert len(locks) == 0


async def test_a_cancelled_wait_gives_up_and_leaves_the_lock_usable() -> None:
    locks = SessionLocks()
    held = await locks.acquire(["k"], Deadline.after(5), CancelToken())
    token = CancelToken()
    waiting = asyncio.ensure_future(locks.acquire(["k"], Deadline.after(5), token))
    await asyncio.sleep(0.02)
    token.cancel()
    with pytest.raises(BridgeError) as caught:
        await waiting
    assert caught.value.code is ErrorCode.CANCELLED
    assert caught.value.message == "request was cancelled while waiting for the session"
    held.release()
    again = await asyncio.wait_for(locks.acquire(["k"], Deadline.after(1), CancelToken()), 1)
    again.release()
    assert len(locks) == 0


async def test_an_already_cancelled_request_never_takes_a_free_lock() -> None:
    locks = SessionLocks()
    token = CancelToken()
    token.cancel()
    with pytest.raises(BridgeError) as caught:
        await locks.acquire(["k"], Deadline.after(5), token)
    assert caught.value.code is ErrorCode.CANCELLED
    assert not locks.held("k") and len(locks) == 0


async def test_a_lease_extends_to_more_keys_and_releases_them_all_once() -> None:
    locks = SessionLocks()
    lease = await locks.acquire(["session:a"], Deadline.after(5), CancelToken())
    await lease.extend("thread:t", Deadline.after(5), CancelToken())
    await lease.extend("thread:t", Deadline.after(5), CancelToken())  # already held
    assert lease.keys == ("session:a", "thread:t")
    lease.release()
    lease.release()
    assert len(locks) == 0
    with pytest.raises(BridgeError):
        await lease.extend("thread:u", Deadline.after(5), CancelToken())


async def test_a_failed_multi_key_acquire_holds_nothing() -> None:
    locks = SessionLocks()
    blocker = await locks.acquire(["b"], Deadline.after(5), CancelToken())
    with pytest.raises(BridgeError):
        await locks.acquire(["a", "b"], Deadline.after(0.05), CancelToken())
    assert not locks.held("a")
    blocker.release()
    assert len(locks) == 0


async def test_task_cancellation_while_waiting_leaves_no_trace() -> None:
    locks = SessionLocks()
    held = await locks.acquire(["k"], Deadline.after(5), CancelToken())
    waiting = asyncio.ensure_future(locks.acquire(["k"], Deadline.after(5), CancelToken()))
    await asyncio.sleep(0.02)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    held.release()
    assert len(locks) == 0
