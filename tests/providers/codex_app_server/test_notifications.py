from __future__ import annotations

import asyncio

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server.notifications import Notification, NotificationChannel


def _note(index: int, thread: str = "t1") -> Notification:
    return Notification("item/completed", {"threadId": thread, "turnId": "u1", "n": index})


def _channel(capacity: int = 2, timeout: float = 1.0) -> NotificationChannel:
    return NotificationChannel(capacity, lambda n: True, slow_consumer_timeout=timeout)


def test_ids_are_read_from_params_or_nested_objects() -> None:
    flat = Notification("item/completed", {"threadId": "t", "turnId": "u"})
    nested = Notification("turn/completed", {"threadId": "t", "turn": {"id": "u"}})
    started = Notification("thread/started", {"thread": {"id": "t"}})
    assert (flat.thread_id, flat.turn_id) == ("t", "u")
    assert (nested.thread_id, nested.turn_id) == ("t", "u")
    assert (started.thread_id, started.turn_id) == ("t", None)


async def test_items_arrive_in_order() -> None:
    channel = _channel(capacity=4)
    for index in range(3):
        assert await channel.deliver(_note(index))
    received = [(await channel.receive()).params["n"] for _ in range(3)]
    assert received == [0, 1, 2]


async def test_a_full_channel_makes_the_sender_wait_for_room() -> None:
    channel = _channel(capacity=2)
    await channel.deliver(_note(0))
    await channel.deliver(_note(1))
    third = asyncio.create_task(channel.deliver(_note(2)))
    await asyncio.sleep(0.05)
    assert not third.done()
    assert len(channel) == 2
    assert (await channel.receive()).params["n"] == 0
    assert await asyncio.wait_for(third, 1)
    assert [(await channel.receive()).params["n"] for _ in range(2)] == [1, 2]


async def test_a_consumer_that_stays_behind_is_cut_off_as_overloaded() -> None:
    channel = _channel(capacity=1, timeout=0.05)
    await channel.deliver(_note(0))
    assert not await channel.deliver(_note(1))
    assert channel.closed
    assert (await channel.receive()).params["n"] == 0
    with pytest.raises(BridgeError) as caught:
        await channel.receive()
    assert caught.value.code is ErrorCode.OVERLOADED
    assert caught.value.retryable


async def test_queued_items_are_delivered_before_the_closing_error() -> None:
    channel = _channel(capacity=4)
    await channel.deliver(_note(0))
    channel.fail(BridgeError(ErrorCode.UPSTREAM, "child died"))
    assert not await channel.deliver(_note(1))
    assert (await channel.receive()).params["n"] == 0
    with pytest.raises(BridgeError) as caught:
        await channel.receive()
    assert caught.value.message == "child died"


async def test_a_waiting_receiver_is_woken_by_failure() -> None:
    channel = _channel()
    waiting = asyncio.create_task(channel.receive())
    await asyncio.sleep(0.01)
    channel.fail(BridgeError(ErrorCode.PROTOCOL, "broken"))
    with pytest.raises(BridgeError) as caught:
        await asyncio.wait_for(waiting, 1)
    assert caught.value.code is ErrorCode.PROTOCOL


async def test_close_by_the_consumer_drops_items_and_refuses_more() -> None:
    channel = _channel()
    await channel.deliver(_note(0))
    channel.close()
    assert not channel.accepts(_note(1))
    assert not await channel.deliver(_note(1))
    with pytest.raises(BridgeError) as caught:
        await channel.receive()
    assert caught.value.code is ErrorCode.CANCELLED
