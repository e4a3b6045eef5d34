"""SSE: heartbeats, backpressure on the provider, cancellation when the client leaves (under
``on_disconnect: cancel``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import PartialImageEvent, ProgressEvent, StartedEvent
from imagebridge.contract.response import ImageResponse, Timings
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.provider import EventSink
from imagebridge.server import ServerOptions
from imagebridge.server.streaming import HEARTBEAT, EventStreamResponse, sse_frame
from tests.server.conftest import ServeFactory
from tests.server.doubles import mock_of
from tests.server.rawhttp import BOUNDARY, multipart_edit, open_request, read_until
from tests.support.waiting import wait_until

SLOW = {
    "operation": "generate",
    "prompt": "[mock:latency=5000] slow",
    "parameters": {"size": "8x8"},
}


def response_for(request_id: str) -> ImageResponse:
    return ImageResponse.model_validate(
        {
            "id": request_id,
            "created": 1,
            "provider": "p",
            "model": "m",
            "requested": {},
            "effective": {},
            "timings": Timings().model_dump(),
        }
    )


class Recorder:
    """An ASGI ``send`` that can be paused to play a client that stopped reading."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.open = asyncio.Event()
        self.open.set()

    async def send(self, message: dict[str, Any]) -> None:
        if self.bodies:  # the start line and ``started`` always go out
            await self.open.wait()
        if message["type"] == "http.response.body":
            self.bodies.append(message.get("body", b""))


async def never_disconnects() -> dict[str, Any]:
    await asyncio.Event().wait()
    return {"type": "http.disconnect"}


async def test_a_slow_reader_makes_the_provider_wait() -> None:
    emitted = 0

    async def operation(sink: EventSink, token: CancelToken) -> ImageResponse:
        nonlocal emitted
        await sink(StartedEvent())
        for index in range(20):
            await sink(PartialImageEvent(index=0, partial_index=index % 4, b64_json="AA=="))
            emitted += 1
        return response_for("r1")

    recorder = Recorder()
    stream = EventStreamResponse(operation, request_id="r1", queue_size=4)
    recorder.open.clear()
    task = asyncio.create_task(stream({}, never_disconnects, recorder.send))
    for _ in range(50):
        await asyncio.sleep(0)
    # four queued frames plus the one the blocked writer holds; the sixth put waits
    assert emitted == 5
    recorder.open.set()
    await asyncio.wait_for(task, 5)
    assert emitted == 20
    frames = b"".join(recorder.bodies).decode()
    assert frames.count("event: partial_image") == 20
    assert frames.startswith('event: started\ndata: {"type":"started"}\n\n')
    assert frames.count("event: started") == 1  # the provider's own started is not repeated
    assert frames.rstrip().split("\n\n")[-1].startswith("event: completed")


async def test_errors_end_the_stream_with_the_envelope() -> None:
    async def operation(sink: EventSink, token: CancelToken) -> ImageResponse:
        await sink(ProgressEvent(stage="provider"))
        raise BridgeError(ErrorCode.RATE_LIMITED, "slow down", details={"retry_after_ms": 10})

    recorder = Recorder()
    await EventStreamResponse(operation, request_id="r2")({}, never_disconnects, recorder.send)
    frames = b"".join(recorder.bodies).decode().strip().split("\n\n")
    assert [frame.split("\n")[0] for frame in frames] == [
        "event: started",
        "event: progress",
        "event: error",
    ]
    envelope = json.loads(frames[-1].split("\n")[1][len("data: ") :])
    assert envelope["request_id"] == "r2"
    assert envelope["error"]["imagegen_bridge"]["code"] == "rate_limited"


async def test_idle_streams_carry_heartbeats() -> None:
    async def operation(sink: EventSink, token: CancelToken) -> ImageResponse:
        await asyncio.sleep(0.35)
        return response_for("r3")

    recorder = Recorder()
    stream = EventStreamResponse(operation, request_id="r3", heartbeat_interval=0.1)
    await stream({}, never_disconnects, recorder.send)
    assert recorder.bodies.count(HEARTBEAT) >= 2
    assert recorder.bodies[-2].startswith(b"event: completed")


def test_frames_are_one_event_and_one_data_line() -> None:
    assert sse_frame("progress", '{"a":1}') == b'event: progress\ndata: {"a":1}\n\n'


def test_heartbeat_comments_reach_a_real_client(serve: ServeFactory) -> None:
    server = serve(options=ServerOptions(heartbeat_interval=0.1))
    body = {**SLOW, "prompt": "[mock:latency=500] slow"}
    with server.client() as client:
        response = client.post("/v1/images/stream", json=body)
    assert response.status_code == 200
    assert ": heartbeat\n\n" in response.text
    assert "event: completed" in response.text


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/images/stream", SLOW),
        ("/v1/images", SLOW),
        ("/v1/images/generations", {"prompt": SLOW["prompt"], "size": "8x8"}),
        ("/v1/images/edits", "multipart"),
    ],
)
def test_client_disconnect_cancels_the_provider_under_the_cancel_policy(
    serve: ServeFactory, path: str, body: dict[str, Any] | str
) -> None:
    """``server.sync.on_disconnect = "cancel"``: the original's rule (the default keeps the
    work once the provider ran: tests/server/execution/test_keep_on_disconnect.py)."""
    server = serve('server.sync.on_disconnect="cancel"')
    mock = mock_of(server)
    if body == "multipart":
        sock = open_request(
            server.port,
            path,
            multipart_edit(str(SLOW["prompt"])),
            content_type=f"multipart/form-data; boundary={BOUNDARY}",
        )
    else:
        sock = open_request(server.port, path, body)
    try:
        if path.endswith("stream"):
            assert b"event: started" in read_until(sock, b"event: started")
        assert wait_until(lambda: mock.in_flight == 1)
    finally:
        sock.close()
    assert wait_until(lambda: mock.cancellations == 1 and mock.in_flight == 0)


async def test_an_unexpected_failure_still_ends_the_stream_with_one_error() -> None:
    async def operation(sink: EventSink, token: CancelToken) -> ImageResponse:
        raise KeyError("bug")

    recorder = Recorder()
    await asyncio.wait_for(
        EventStreamResponse(operation, request_id="r4")({}, never_disconnects, recorder.send), 5
    )
    frames = b"".join(recorder.bodies).decode().strip().split("\n\n")
    assert [frame.split("\n")[0] for frame in frames] == ["event: started", "event: error"]
    assert '"code":"internal_error"' in frames[-1] and "bug" not in frames[-1]


class Deferring:
    """A dialect without a ``started`` frame, like OpenAI's."""

    started = None

    def event(self, event: Any) -> bytes | None:
        return sse_frame("partial", b"{}") if isinstance(event, PartialImageEvent) else None

    def completed(self, response: ImageResponse) -> bytes:
        return sse_frame("done", b"{}")

    def error(self, error: BridgeError, request_id: str) -> bytes:
        return sse_frame("error", error.code.value.encode())


class Messages:
    """An ASGI ``send`` keeping whole messages (status and headers included)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if "body" in m)


async def test_a_deferred_stream_answers_an_early_failure_as_json() -> None:
    async def operation(sink: EventSink, token: CancelToken) -> ImageResponse:
        await sink(ProgressEvent(stage="validating"))  # not an event of this dialect
        raise BridgeError(ErrorCode.UNSUPPORTED_CAPABILITY, "no", details={"field": "size"})

    sent = Messages()
    stream = EventStreamResponse(operation, request_id="r5", dialect=Deferring())
    await asyncio.wait_for(stream({"type": "http"}, never_disconnects, sent.send), 5)
    start = sent.messages[0]
    assert start["status"] == 400
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"x-should-retry"] == b"false"
    assert json.loads(sent.body())["error"]["param"] == "size"


async def test_a_deferred_stream_starts_on_its_first_frame_or_heartbeat() -> None:
    async def operation(sink: EventSink, token: CancelToken) -> ImageResponse:
        await sink(PartialImageEvent(index=0, partial_index=0, b64_json="AA=="))
        await asyncio.sleep(0.3)
        raise BridgeError(ErrorCode.UPSTREAM, "late")

    async def slow(sink: EventSink, token: CancelToken) -> ImageResponse:
        await asyncio.sleep(0.3)
        return response_for("r7")

    early, idle = Messages(), Messages()
    await EventStreamResponse(operation, request_id="r6", dialect=Deferring())(
        {"type": "http"}, never_disconnects, early.send
    )
    assert early.messages[0]["status"] == 200
    assert (
        early.body().replace(HEARTBEAT, b"")
        == b"event: partial\ndata: {}\n\nevent: error\ndata: upstream\n\n"
    )
    stream = EventStreamResponse(
        slow, request_id="r7", heartbeat_interval=0.05, dialect=Deferring()
    )
    await stream({"type": "http"}, never_disconnects, idle.send)
    assert idle.messages[0]["status"] == 200
    assert idle.body().count(HEARTBEAT) >= 1
    assert idle.body().endswith(b"event: done\ndata: {}\n\n")
