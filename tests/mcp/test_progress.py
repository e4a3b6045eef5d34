"""Progress relay: ordering, messages, heartbeats and a client that cannot be reached."""

from __future__ import annotations

import asyncio

from imagebridge.contract.events import (
    CompletedEvent,
    PartialImageEvent,
    ProgressEvent,
    StartedEvent,
)
from imagebridge.mcp.progress import ProgressRelay, event_message
from tests.mcp.conftest import Progress


async def test_events_become_increasing_progress_with_short_messages() -> None:
    progress = Progress()
    relay = ProgressRelay(progress, heartbeat_s=60)
    async with relay.running():
        await relay.on_event(StartedEvent())
        await relay.on_event(ProgressEvent(stage="generating\x07" + "x" * 200))
        await relay.on_event(PartialImageEvent(index=1, partial_index=0, b64_json="AAAA"))
    assert progress.messages[0] == "started"
    assert progress.messages[1] == "generating" + "x" * 70
    assert progress.messages[2] == "partial image 1 of output 2"
    assert [p for p, _, _ in progress.events] == [1.0, 2.0, 3.0]


async def test_heartbeats_while_nothing_happens() -> None:
    progress = Progress()
    relay = ProgressRelay(progress, heartbeat_s=0.02)
    async with relay.running():
        await asyncio.sleep(0.1)
    beats = [m for m in progress.messages if m and m.startswith("still working")]
    assert len(beats) >= 2
    sent = relay.sent
    await asyncio.sleep(0.06)
    assert relay.sent == sent  # the heartbeat stopped with the block


async def test_a_failing_client_never_fails_the_generation() -> None:
    async def broken(progress: float, total: float | None, message: str | None) -> None:
        raise ConnectionError("client went away")

    relay = ProgressRelay(broken, heartbeat_s=60)
    async with relay.running():
        await relay.on_event(ProgressEvent(stage="generating"))
    assert relay.sent == 2


def test_completed_message() -> None:
    response = {
        "id": "x", "created": 1, "provider": "p", "model": "m",
        "requested": {}, "effective": {}, "data": [],
    }  # fmt: skip
    assert event_message(CompletedEvent.model_validate({"response": response})) == "completed"
