"""Persistent sessions, explicit threads and per-session serialization, through the engine."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import ProgressEvent
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.provider import ProviderContext, ProviderEventT
from imagebridge.storage.sqlite.sessions import SqliteSessionStore
from tests.support.fake_codex import FINAL_PNG

from .bridge import PROVIDER, BridgeHarness, decoded, image_request


def persistent(key: str, **fields: Any) -> dict[str, Any]:
    return {"session": {"mode": "persistent", "key": key}, **fields}


# -- persistent sessions --------------------------------------------------------------------


async def test_a_persistent_session_starts_a_durable_thread_then_resumes_it(
    bridge: BridgeHarness,
) -> None:
    app = bridge.app()
    first = await app.runtime.execute(image_request(**persistent("poster")))
    second = await app.runtime.execute(image_request(**persistent("poster")))
    assert first.session is not None and second.session is not None
    assert (first.session.key, first.session.reused) == ("poster", False)
    assert (second.session.key, second.session.reused) == ("poster", True)
    assert second.session.thread_id == first.session.thread_id
    assert decoded(second.data[0].b64_json) == FINAL_PNG

    await bridge.settle(app)
    (start,) = bridge.received("thread/start")
    assert start["params"]["ephemeral"] is False
    (resume,) = bridge.received("thread/resume")
    assert resume["params"] == {"threadId": first.session.thread_id, "excludeTurns": True}
    turns = bridge.received("turn/start")
    assert [t["params"]["threadId"] for t in turns] == [first.session.thread_id] * 2
    assert bridge.received("thread/archive") == []  # durable threads are kept


async def test_the_binding_is_stored_in_the_configured_session_database(
    bridge: BridgeHarness,
) -> None:
    database = bridge.tmp_path / "elsewhere" / "sessions.sqlite3"
    app = bridge.app(f'providers.codex_app_server.session_database="{database}"')
    response = await app.runtime.execute(image_request(**persistent("poster")))
    await app.aclose()  # closes the store it opened
    assert response.session is not None
    async with await SqliteSessionStore.open(database, provider=PROVIDER) as store:
        assert await store.get("poster") == response.session.thread_id


async def test_a_persistent_session_survives_a_bridge_restart(bridge: BridgeHarness) -> None:
    before = bridge.app()
    first = await before.runtime.execute(image_request(**persistent("poster")))
    await before.aclose()

    after = bridge.app()  # same data dir, same session database, a new codex child
    second = await after.runtime.execute(image_request(**persistent("poster")))
    assert first.session is not None and second.session is not None
    assert second.session.reused is True
    assert second.session.thread_id == first.session.thread_id
    (resume,) = bridge.received("thread/resume")
    assert resume["params"]["threadId"] == first.session.thread_id
    assert len(bridge.received("thread/start")) == 1
    assert len(bridge.events("started")) == 2  # two children, one per bridge


async def test_different_keys_get_different_threads(bridge: BridgeHarness) -> None:
    app = bridge.app()
    one = await app.runtime.execute(image_request(**persistent("one")))
    two = await app.runtime.execute(image_request(**persistent("two")))
    assert one.session is not None and two.session is not None
    assert one.session.thread_id != two.session.thread_id


# -- explicit threads -----------------------------------------------------------------------


async def test_an_explicit_thread_is_resumed(bridge: BridgeHarness) -> None:
    app = bridge.app()
    seeded = await app.runtime.execute(image_request(**persistent("seed")))
    assert seeded.session is not None and seeded.session.thread_id is not None
    thread_id = seeded.session.thread_id

    response = await app.runtime.execute(
        image_request(session={"mode": "thread", "thread_id": thread_id})
    )
    assert response.session is not None
    assert response.session.key is None
    assert (response.session.thread_id, response.session.reused) == (thread_id, True)
    assert [r["params"]["threadId"] for r in bridge.received("thread/resume")] == [thread_id]


async def test_an_unknown_thread_is_a_session_error(bridge: BridgeHarness) -> None:
    app = bridge.app()
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(
            image_request(session={"mode": "thread", "thread_id": "thread-nobody-knows"})
        )
    error = caught.value
    assert error.code is ErrorCode.SESSION
    assert error.http_status == 404
    assert error.details["session_mode"] == "thread"
    assert "thread-nobody-knows" not in error.message
    assert bridge.received("turn/start") == []


# -- the session endpoints' provider methods --------------------------------------------------


async def test_get_and_delete_session_read_and_remove_the_binding(bridge: BridgeHarness) -> None:
    app = bridge.app()
    provider = app.runtime.registry.resolve(PROVIDER)
    response = await app.runtime.execute(image_request(**persistent("poster")))
    assert response.session is not None

    session = await provider.get_session("poster")
    assert session.model_dump(mode="json") == {
        "key": "poster",
        "thread_id": response.session.thread_id,
        "reused": True,
    }
    await provider.delete_session("poster")
    for call in (provider.get_session, provider.delete_session):
        with pytest.raises(BridgeError) as caught:
            await call("poster")
        assert caught.value.code is ErrorCode.SESSION
        assert caught.value.message == "persistent session was not found"
        assert caught.value.http_status == 404

    again = await app.runtime.execute(image_request(**persistent("poster")))
    assert again.session is not None
    assert again.session.reused is False
    assert again.session.thread_id != response.session.thread_id
    methods = [entry["received"]["method"] for entry in bridge.log() if "received" in entry]
    assert "thread/archive" not in methods  # deleting a binding makes no codex call


async def test_session_methods_never_start_codex(bridge: BridgeHarness) -> None:
    app = bridge.app()
    provider = app.runtime.registry.resolve(PROVIDER)
    with pytest.raises(BridgeError) as caught:
        await provider.get_session("never-used")
    assert caught.value.code is ErrorCode.SESSION
    with pytest.raises(BridgeError) as caught:
        await provider.get_session("")
    assert caught.value.code is ErrorCode.SESSION
    assert bridge.fake_pids() == set()


# -- one turn at a time per session ---------------------------------------------------------


def _turn_order(bridge: BridgeHarness) -> list[tuple[str, str]]:
    return [
        (entry["event"], entry["turn"])
        for entry in bridge.log()
        if entry.get("event") in ("turn_start", "turn_end")
    ]


async def test_requests_for_the_same_session_run_one_after_the_other(
    bridge: BridgeHarness,
) -> None:
    bridge.scenario(default_turn={"mode": "result", "delay_seconds": 0.3})
    app = bridge.app()
    first, second = await asyncio.gather(
        app.runtime.execute(image_request(**persistent("shared"))),
        app.runtime.execute(image_request(**persistent("shared"))),
    )
    assert first.session is not None and second.session is not None
    assert first.session.thread_id == second.session.thread_id
    assert sorted([first.session.reused, second.session.reused]) == [False, True]
    await bridge.settle(app)
    order = _turn_order(bridge)
    assert [event for event, _ in order] == ["turn_start", "turn_end", "turn_start", "turn_end"]
    assert order[0][1] == order[1][1] and order[2][1] == order[3][1]
    assert len(bridge.received("thread/start")) == 1  # the second one found the binding


async def test_requests_for_different_sessions_overlap(bridge: BridgeHarness) -> None:
    bridge.scenario(default_turn={"mode": "result", "delay_seconds": 0.3})
    app = bridge.app()
    await asyncio.gather(
        app.runtime.execute(image_request(**persistent("left"))),
        app.runtime.execute(image_request(**persistent("right"))),
    )
    await bridge.settle(app)
    assert [event for event, _ in _turn_order(bridge)][:2] == ["turn_start", "turn_start"]


async def test_an_explicit_thread_waits_for_a_persistent_turn_on_the_same_thread(
    bridge: BridgeHarness,
) -> None:
    app = bridge.app()
    seeded = await app.runtime.execute(image_request(**persistent("seed")))
    assert seeded.session is not None
    bridge.scenario(default_turn={"mode": "result", "delay_seconds": 0.3})
    await asyncio.gather(
        app.runtime.execute(image_request(**persistent("seed"))),
        app.runtime.execute(
            image_request(session={"mode": "thread", "thread_id": seeded.session.thread_id})
        ),
    )
    await bridge.settle(app)
    events = [event for event, _ in _turn_order(bridge)][2:]  # after the seeding turn
    assert events == ["turn_start", "turn_end", "turn_start", "turn_end"]


async def test_a_request_stuck_behind_the_session_starts_no_turn(bridge: BridgeHarness) -> None:
    bridge.scenario(turns=[{"mode": "hang"}])
    app = bridge.app()
    provider = bridge.provider(app)
    blocker = asyncio.ensure_future(app.runtime.execute(image_request(**persistent("busy"))))
    await bridge.wait_for(lambda: bool(bridge.events("turn_start")))

    stages: list[str] = []

    async def sink(event: ProviderEventT) -> None:
        if isinstance(event, ProgressEvent):
            stages.append(event.stage)

    waiting = ProviderContext("waiting-1", Deadline.after(0.3), events=sink)
    with pytest.raises(BridgeError) as caught:
        await provider.execute(image_request(**persistent("busy")), waiting)
    assert stages == ["waiting_for_session"]
    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.message == "request timed out while waiting for the session"
    assert caught.value.retryable

    token = CancelToken()
    cancelled = ProviderContext("waiting-2", Deadline.after(10), cancellation=token)
    pending = asyncio.ensure_future(
        provider.execute(image_request(**persistent("busy")), cancelled)
    )
    await asyncio.sleep(0.05)
    token.cancel()
    with pytest.raises(BridgeError) as caught:
        await pending
    assert caught.value.code is ErrorCode.CANCELLED
    assert caught.value.message == "request was cancelled while waiting for the session"

    assert len(bridge.events("turn_start")) == 1
    blocker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await blocker
    await bridge.settle(app)
    assert len(bridge.received("turn/interrupt")) == 1  # the abandoned turn was stopped
