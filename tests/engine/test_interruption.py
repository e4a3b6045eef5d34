"""The race every transport runs: its work against cancellation and a time budget."""

from __future__ import annotations

import asyncio

import pytest

from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.interruption import wait_unless_interrupted


async def test_finished_work_wins() -> None:
    task = asyncio.ensure_future(asyncio.sleep(0, result="image"))
    assert await wait_unless_interrupted(task, CancelToken(), timeout=5) is True
    assert task.result() == "image"


async def test_a_cancel_ends_the_wait_and_leaves_the_work_to_the_caller() -> None:
    token = CancelToken()
    task = asyncio.ensure_future(asyncio.sleep(30))
    asyncio.get_running_loop().call_later(0.01, token.cancel)
    assert await wait_unless_interrupted(task, token, timeout=5) is False
    assert not task.done()  # still running: closing or interrupting it is the caller's call
    task.cancel()


async def test_the_time_budget_ends_the_wait() -> None:
    task = asyncio.ensure_future(asyncio.sleep(30))
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await wait_unless_interrupted(task, CancelToken(), timeout=0.05) is False
    assert 0.04 <= loop.time() - began < 5
    assert not task.done()
    task.cancel()


async def test_an_already_cancelled_token_returns_at_once() -> None:
    token = CancelToken()
    token.cancel()
    task = asyncio.ensure_future(asyncio.sleep(30))
    assert await wait_unless_interrupted(task, token, timeout=None) is False
    task.cancel()


async def test_cancelling_the_wait_cancels_the_work_too() -> None:
    task = asyncio.ensure_future(asyncio.sleep(30))
    waiter = asyncio.ensure_future(wait_unless_interrupted(task, CancelToken(), timeout=None))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.sleep(0)
    assert task.cancelled()
