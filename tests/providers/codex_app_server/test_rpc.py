"""The JSON-RPC link against an in-memory peer that plays codex line by line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.rpc import RpcConnection


class Peer:
    """The codex end of the link: sees every line the client writes, writes lines back."""

    def __init__(self) -> None:
        self.to_client = asyncio.StreamReader()
        self.received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.raw_lines: list[bytes] = []
        self._closing = False

    # LineSink
    def write(self, data: bytes) -> None:
        for line in data.splitlines():
            self.raw_lines.append(line)
            self.received.put_nowait(json.loads(line))

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self._closing = True

    def is_closing(self) -> bool:
        return self._closing

    # scripting
    def send(self, message: dict[str, Any]) -> None:
        self.to_client.feed_data(json.dumps(message).encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        self.to_client.feed_data(data)

    async def next(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.received.get(), 2)


OPTIONS = AppServerOptions(
    rpc_max_message_bytes=4096,
    rpc_max_notification_bytes=2048,
    rpc_timeout_ms=2_000,
    notification_capacity=4,
    slow_consumer_timeout_ms=500,
)


@pytest.fixture
async def peer() -> Peer:
    return Peer()


@pytest.fixture
async def link(peer: Peer) -> AsyncIterator[RpcConnection]:
    connection = RpcConnection(peer.to_client, peer, OPTIONS)
    connection.start()
    yield connection
    await connection.close()


async def test_requests_carry_increasing_ids_and_no_jsonrpc_member(
    link: RpcConnection, peer: Peer
) -> None:
    first = asyncio.create_task(link.request("account/read"))
    second = asyncio.create_task(link.request("modelProvider/capabilities/read", {"x": 1}))
    a, b = await peer.next(), await peer.next()
    assert a == {"method": "account/read", "id": 1, "params": {}}
    assert b == {"method": "modelProvider/capabilities/read", "id": 2, "params": {"x": 1}}
    peer.send({"id": 1, "result": None})
    peer.send({"id": 2, "result": {"ok": True}})
    assert await first is None
    assert await second == {"ok": True}


async def test_responses_are_matched_by_id_whatever_their_order(
    link: RpcConnection, peer: Peer
) -> None:
    tasks = [asyncio.create_task(link.request("echo", {"n": n})) for n in range(5)]
    requests = [await peer.next() for _ in range(5)]
    peer.send({"id": 999, "result": "nobody asked"})  # unknown ids are ignored
    for request in reversed(requests):
        peer.send({"id": request["id"], "result": request["params"]["n"] * 10})
    assert await asyncio.gather(*tasks) == [0, 10, 20, 30, 40]
    assert not link.closed


async def test_error_answers_map_to_upstream_without_reflecting_the_message(
    link: RpcConnection, peer: Peer
) -> None:
    task = asyncio.create_task(link.request("thread/resume", {"threadId": "t"}))
    request = await peer.next()
    peer.send({"id": request["id"], "error": {"code": -32600, "message": "secret detail xyz"}})
    with pytest.raises(BridgeError) as caught:
        await task
    error = caught.value
    assert error.code is ErrorCode.UPSTREAM
    assert not error.retryable
    assert error.details == {"rpc_method": "thread/resume", "rpc_code": -32600}
    assert "secret detail" not in json.dumps(error.to_dict())


async def test_a_safety_string_code_becomes_safety_rejected(
    link: RpcConnection, peer: Peer
) -> None:
    task = asyncio.create_task(link.request("turn/start"))
    request = await peer.next()
    peer.send({"id": request["id"], "error": {"code": "content_policy_violation", "message": "no"}})
    with pytest.raises(BridgeError) as caught:
        await task
    assert caught.value.code is ErrorCode.SAFETY_REJECTED
    assert caught.value.details["rpc_code"] == "content_policy_violation"
    # An explicit refusal is a known outcome even for a side-effecting method.
    assert caught.value.details.get("outcome") is None


async def test_a_timeout_is_retryable_for_reads(link: RpcConnection, peer: Peer) -> None:
    with pytest.raises(BridgeError) as caught:
        await link.request("account/read", timeout=0.05)
    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.retryable
    assert caught.value.details["rpc_method"] == "account/read"
    # the late answer is ignored and the link keeps working
    late = await peer.next()
    peer.send({"id": late["id"], "result": {}})
    task = asyncio.create_task(link.request("account/read"))
    request = await peer.next()
    peer.send({"id": request["id"], "result": {"account": None}})
    assert await task == {"account": None}


async def test_a_timeout_of_a_side_effecting_request_has_an_unknown_outcome(
    link: RpcConnection,
) -> None:
    with pytest.raises(BridgeError) as caught:
        await link.request("turn/start", {"threadId": "t", "input": []}, timeout=0.05)
    error = caught.value
    assert error.code is ErrorCode.TIMEOUT
    assert not error.retryable
    assert error.details["outcome"] == "unknown"
    assert error.details["request_sent"] is True
    assert error.details["rpc_id"] == 1


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b'{"id": 1, "result": \n', "not valid JSON"),
        (b"[1, 2]\n", "not an object"),
        (b'{"params": {}}\n', "neither a method nor an id"),
        (b'{"method": "x", "params": {"blob": "' + b"a" * 5000 + b'"}}\n', "larger than"),
        (b"a" * 5000, "larger than"),
    ],
    ids=["malformed", "non-object", "no-method-no-id", "oversize-complete", "oversize-partial"],
)
async def test_a_broken_line_closes_the_link_with_protocol_and_fails_pending_requests(
    link: RpcConnection, peer: Peer, payload: bytes, fragment: str
) -> None:
    task = asyncio.create_task(link.request("account/read"))
    await peer.next()
    channel = link.subscribe()
    peer.send_raw(payload)
    with pytest.raises(BridgeError) as caught:
        await asyncio.wait_for(task, 2)
    assert caught.value.code is ErrorCode.PROTOCOL
    assert fragment in link.close_error.message  # type: ignore[union-attr]
    assert link.closed
    with pytest.raises(BridgeError) as from_channel:
        await channel.receive()
    assert from_channel.value.code is ErrorCode.PROTOCOL
    with pytest.raises(BridgeError) as later:
        await link.request("account/read")
    assert later.value.code is ErrorCode.PROTOCOL


async def test_a_notification_over_its_own_limit_is_a_protocol_error(
    link: RpcConnection, peer: Peer
) -> None:
    # 3000 bytes: under the 4096-byte message limit, over the 2048-byte notification limit
    peer.send({"method": "item/completed", "params": {"blob": "b" * 3000}})
    await asyncio.sleep(0.05)
    assert link.closed
    assert link.close_error is not None
    assert link.close_error.code is ErrorCode.PROTOCOL
    assert link.close_error.details["limit_bytes"] == 2048


async def test_a_response_may_exceed_the_notification_limit(
    link: RpcConnection, peer: Peer
) -> None:
    task = asyncio.create_task(link.request("thread/start"))
    request = await peer.next()
    peer.send({"id": request["id"], "result": {"blob": "c" * 3000}})
    assert len((await task)["blob"]) == 3000


async def test_end_of_output_fails_pending_requests_and_marks_side_effects_unknown(
    link: RpcConnection, peer: Peer
) -> None:
    read = asyncio.create_task(link.request("account/read"))
    turn = asyncio.create_task(link.request("turn/start", {"threadId": "t", "input": []}))
    await peer.next()
    await peer.next()
    peer.to_client.feed_eof()
    with pytest.raises(BridgeError) as read_error:
        await read
    with pytest.raises(BridgeError) as turn_error:
        await turn
    assert read_error.value.code is ErrorCode.UPSTREAM
    assert read_error.value.retryable
    assert turn_error.value.code is ErrorCode.UPSTREAM
    assert not turn_error.value.retryable
    assert turn_error.value.details["outcome"] == "unknown"
    assert turn_error.value.details["rpc_method"] == "turn/start"


async def test_an_outgoing_message_over_the_limit_is_refused_before_sending(
    link: RpcConnection, peer: Peer
) -> None:
    with pytest.raises(BridgeError) as caught:
        await link.request("turn/start", {"text": "x" * 5000})
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["limit_bytes"] == 4096
    assert peer.raw_lines == []
    assert not link.closed


@pytest.mark.parametrize(
    ("method", "result"),
    [
        ("item/commandExecution/requestApproval", {"decision": "decline"}),
        ("item/fileChange/requestApproval", {"decision": "decline"}),
        ("item/permissions/requestApproval", {"permissions": {}, "scope": "turn"}),
        ("mcpServer/elicitation/request", {"action": "decline", "content": None}),
    ],
)
async def test_approval_requests_are_declined_at_once(
    link: RpcConnection, peer: Peer, method: str, result: dict[str, Any]
) -> None:
    # Server request ids live in codex's own id space and may equal ours.
    pending = asyncio.create_task(link.request("account/read"))
    ours = await peer.next()
    peer.send({"id": ours["id"], "method": method, "params": {"threadId": "t", "turnId": "u"}})
    reply = await peer.next()
    assert reply == {"id": ours["id"], "result": result}
    assert not pending.done()  # the server request did not complete our request
    peer.send({"id": ours["id"], "result": "mine"})
    assert await pending == "mine"
    assert link.server_requests_answered == {method: 1}


async def test_legacy_approvals_are_denied_and_string_ids_echoed(
    link: RpcConnection, peer: Peer
) -> None:
    peer.send({"id": "approval-7", "method": "execCommandApproval", "params": {}})
    reply = await peer.next()
    assert reply["id"] == "approval-7"
    assert set(reply["result"]["decision"]) == {"denied"}


async def test_unhandled_server_requests_get_method_not_found(
    link: RpcConnection, peer: Peer
) -> None:
    for index, method in enumerate(
        ["account/chatgptAuthTokens/refresh", "item/tool/requestUserInput", "brand/new"]
    ):
        peer.send({"id": 100 + index, "method": method, "params": {}})
        reply = await peer.next()
        assert reply["id"] == 100 + index
        assert reply["error"]["code"] == -32601
        assert "result" not in reply


async def test_notifications_reach_only_matching_subscribers(
    link: RpcConnection, peer: Peer
) -> None:
    mine = link.subscribe(thread_id="t1")
    everyone = link.subscribe(methods={"turn/completed"})
    peer.send({"method": "item/agentMessage/delta", "params": {"threadId": "t1", "delta": "x"}})
    peer.send({"method": "item/completed", "params": {"threadId": "t2", "turnId": "u", "item": {}}})
    peer.send({"method": "item/completed", "params": {"threadId": "t1", "turnId": "u", "item": {}}})
    peer.send({"method": "turn/completed", "params": {"threadId": "t1", "turn": {"id": "u"}}})
    first = await asyncio.wait_for(mine.receive(), 1)
    second = await asyncio.wait_for(mine.receive(), 1)
    assert (first.method, first.thread_id) == ("item/completed", "t1")
    assert second.method == "turn/completed"
    only = await asyncio.wait_for(everyone.receive(), 1)
    assert only.method == "turn/completed"
    assert len(mine) == 0
    assert len(everyone) == 0


async def test_a_burst_larger_than_the_capacity_is_not_lost(
    link: RpcConnection, peer: Peer
) -> None:
    channel = link.subscribe(thread_id="t")
    burst = b"".join(
        json.dumps(
            {"method": "item/completed", "params": {"threadId": "t", "turnId": "u", "n": n}}
        ).encode()
        + b"\n"
        for n in range(20)
    )
    peer.send_raw(burst)  # one chunk: the reader must wait for the consumer, not drop
    received = [(await asyncio.wait_for(channel.receive(), 1)).params["n"] for _ in range(20)]
    assert received == list(range(20))
    assert not link.closed


async def test_a_stuck_consumer_does_not_stall_other_traffic_for_long(
    link: RpcConnection, peer: Peer
) -> None:
    stuck = link.subscribe(thread_id="t", capacity=1)
    for n in range(3):
        peer.send({"method": "item/completed", "params": {"threadId": "t", "turnId": "u", "n": n}})
    task = asyncio.create_task(link.request("account/read"))
    request = await peer.next()
    peer.send({"id": request["id"], "result": "still answered"})
    assert await asyncio.wait_for(task, 2) == "still answered"
    assert stuck.closed
    assert stuck.error is not None
    assert stuck.error.code is ErrorCode.OVERLOADED


async def test_close_fails_pending_requests_with_the_given_reason(
    link: RpcConnection, peer: Peer
) -> None:
    task = asyncio.create_task(link.request("account/read"))
    await peer.next()
    await link.close(BridgeError(ErrorCode.CANCELLED, "shutting down"))
    with pytest.raises(BridgeError) as caught:
        await task
    assert caught.value.code is ErrorCode.CANCELLED
    assert peer.is_closing()


async def test_large_lines_are_parsed_correctly(peer: Peer) -> None:
    big = AppServerOptions(
        rpc_max_message_bytes=4 * 1024 * 1024, rpc_max_notification_bytes=4 * 1024 * 1024
    )
    connection = RpcConnection(peer.to_client, peer, big)
    connection.start()
    try:
        task = asyncio.create_task(connection.request("thread/start"))
        request = await peer.next()
        blob = "d" * (1024 * 1024)
        peer.send({"id": request["id"], "result": {"blob": blob}})
        assert (await task)["blob"] == blob
    finally:
        await connection.close()


class DeafPeer(Peer):
    """A peer whose stdin is gone: every write fails like a broken pipe."""

    async def drain(self) -> None:
        raise BrokenPipeError("child stdin closed")


@pytest.mark.parametrize(
    ("method", "retryable", "outcome"),
    [("account/read", True, None), ("turn/start", False, "unknown")],
)
async def test_a_failed_write_closes_the_link_and_reports_the_outcome(
    method: str, retryable: bool, outcome: str | None
) -> None:
    peer = DeafPeer()
    connection = RpcConnection(peer.to_client, peer, OPTIONS)
    connection.start()
    try:
        with pytest.raises(BridgeError) as caught:
            await connection.request(method, {})
        error = caught.value
        assert error.code is ErrorCode.UPSTREAM
        assert error.retryable is retryable
        assert error.details.get("outcome") == outcome
        assert connection.closed
        with pytest.raises(BridgeError) as next_call:
            await connection.notify("initialized")
        assert next_call.value.code is ErrorCode.UPSTREAM
    finally:
        await connection.close()
