"""Transport-level behaviour: body limits, unexpected failures, connection limits."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.response import SessionMetadata
from imagebridge.server.errors import bridge_error_handler
from imagebridge.server.events import OperatorEvents
from imagebridge.server.middleware import BridgeMiddleware, MiddlewareSettings
from tests.server.conftest import ServeFactory
from tests.server.doubles import png
from tests.support.fakes import FakeProvider
from tests.support.waiting import wait_until

GENERATE = {"operation": "generate", "prompt": "test", "parameters": {"size": "8x8"}}


def assert_too_large(response: httpx.Response) -> None:
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"] == "request body exceeds the byte limit"
    assert error["imagegen_bridge"]["details"]["maximum_bytes"] == 2048
    assert response.json()["request_id"] == response.headers["x-request-id"]


def test_declared_content_length_over_the_limit_is_413(serve: ServeFactory) -> None:
    server = serve("server.max_body_bytes=2048")
    big = {**GENERATE, "prompt": "p" * 4096}
    with server.client() as client:
        for path in ("/v1/images", "/v1/images/stream", "/v1/images/generations"):
            assert_too_large(client.post(path, json=big))
        files = [("image", ("a.png", b"\x89PNG" + b"0" * 4096, "image/png"))]
        assert_too_large(client.post("/v1/images/edits", files=files, data={"prompt": "t"}))
        assert client.post("/v1/images", json=GENERATE).status_code == 200


def test_streamed_body_over_the_limit_is_413(serve: ServeFactory) -> None:
    server = serve("server.max_body_bytes=2048")

    def chunks() -> Iterator[bytes]:
        for _ in range(8):
            yield b" " * 512

    with server.client() as client:
        response = client.post(
            "/v1/images", content=chunks(), headers={"content-type": "application/json"}
        )
    assert "content-length" not in response.request.headers
    assert_too_large(response)


def test_body_exactly_at_the_limit_is_read(serve: ServeFactory) -> None:
    body = b'{"operation":"generate","prompt":"test","parameters":{"size":"8x8"}}'
    server = serve(f"server.max_body_bytes={len(body)}")
    with server.client() as client:
        response = client.post("/v1/images", content=body)
    assert response.status_code == 200


class ExplodingSessions(FakeProvider):
    async def get_session(self, key: str) -> SessionMetadata:
        raise RuntimeError(f"bug while looking up {key}")


def test_unexpected_exceptions_become_internal_envelopes(serve: ServeFactory) -> None:
    server = serve('default_provider="boom"', providers=[ExplodingSessions("boom")])
    with server.client() as client:
        response = client.get("/v1/sessions/secret-session-key")
    assert response.status_code == 500
    error = response.json()["error"]
    assert (error["code"], error["message"]) == ("internal_error", "internal error")
    assert "secret-session-key" not in response.text
    assert response.json()["request_id"] == response.headers["x-request-id"]
    assert "traceparent" in response.headers


def test_max_connections_queues_instead_of_refusing(serve: ServeFactory) -> None:
    server = serve("server.max_connections=1")
    slow = b'{"operation":"generate","prompt":"[mock:latency=400] x","parameters":{"size":"8x8"}}'
    sock = socket.create_connection(("127.0.0.1", server.port))
    try:
        sock.sendall(
            b"POST /v1/images HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(slow)}\r\n\r\n".encode()
            + slow
        )
        assert wait_until(lambda: server.state.runtime.global_gate.active == 1)
        started = time.monotonic()
        with server.client() as client:
            response = client.get("/health/live")  # waits for the slot, then succeeds
        assert response.status_code == 200
        assert time.monotonic() - started > 0.15
        reply = sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200")
    finally:
        sock.close()


def test_edit_part_over_the_image_limit_is_an_input_error(serve: ServeFactory) -> None:
    server = serve("artifacts.image.max_encoded_bytes=1024")
    with server.client() as client:
        small = client.post(
            "/v1/images/edits",
            files=[("image", ("a.png", png(), "image/png"))],
            data={"prompt": "t", "size": "8x8"},
        )
        large = client.post(
            "/v1/images/edits",
            files=[("image", ("a.png", b"x" * 2048, "image/png"))],
            data={"prompt": "t"},
        )
    assert small.status_code == 200, small.text
    assert large.status_code == 400
    assert large.json()["error"]["code"] == "invalid_image_input"


def scope_for(path: str = "/v1/images") -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": path, "headers": [], "query_string": b""}


async def test_a_stalled_write_gives_up_instead_of_hanging() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x" * 10, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def stalled_send(message: Any) -> None:
        if message["type"] == "http.response.body":
            await asyncio.Event().wait()  # the client stopped reading

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    events = OperatorEvents()
    middleware = BridgeMiddleware(
        app, settings=MiddlewareSettings(write_timeout_ms=50), events=events
    )
    await asyncio.wait_for(middleware(scope_for(), receive, stalled_send), 5)
    assert events.snapshot()["items"][0]["status"] == 200


async def test_a_stalled_body_read_is_a_408_when_enabled() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await Request(scope, receive).body()
        raise AssertionError("the body never arrives")

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def silent_receive() -> Any:
        await asyncio.Event().wait()
        return {}

    fastapi_like = ExceptionMiddleware(app)
    fastapi_like.add_exception_handler(BridgeError, bridge_error_handler)
    middleware = BridgeMiddleware(
        fastapi_like,
        settings=MiddlewareSettings(read_timeout_ms=50),
        events=OperatorEvents(),
    )
    await asyncio.wait_for(middleware(scope_for(), silent_receive, send), 5)
    assert sent[0]["status"] == 408
    body = json.loads(sent[1]["body"])
    assert body["error"]["message"] == "request body was not received in time"
