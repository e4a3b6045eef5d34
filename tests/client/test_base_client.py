"""Transport behaviour: error mapping, retries and their limits, size bounds, idempotency.

Most cases run against the real bridge; a few use ``httpx.MockTransport`` to produce
answers a correct bridge never sends (a retryable error with an unknown outcome, a
proxy's bare 502, malformed JSON), so the client's own rules are what is tested.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Callable

import httpx
import pytest

from imagebridge.client import (
    AsyncImageBridgeClient,
    BridgeAPIError,
    ErrorCode,
    ImageBridgeClient,
    RetryPolicy,
    _base_client,
)
from imagebridge.contract.errors import BridgeError, error_envelope
from tests.client.conftest import (
    FAST_RETRY,
    Client,
    Recorder,
    close,
    collect,
    make_client,
    resolve,
)
from tests.server.conftest import LiveServer

SMALL = {"size": "16x16"}


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Replace the retry sleeps by a recorder (the waits are checked, not slept through)."""
    recorded: list[float] = []

    def sleep(seconds: float) -> None:
        recorded.append(seconds)

    async def async_sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(_base_client, "sleep", sleep)
    monkeypatch.setattr(_base_client, "async_sleep", async_sleep)
    return recorded


def image_posts(recorder: Recorder) -> list[httpx.Request]:
    return [r for r in recorder.requests if r.method == "POST" and r.url.path == "/v1/images"]


# -- error mapping against the real bridge ------------------------------------------------------


async def test_not_found_jobs_and_presets(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.jobs.get(str(uuid.UUID(int=1))))
    assert caught.value.status_code == 404
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["resource"] == "job"
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.presets.get("no-such-preset"))
    assert caught.value.status_code == 404
    assert caught.value.details["resource"] == "preset"


async def test_idempotency_conflict_is_409(api: Client) -> None:
    key = f"conflict-{uuid.uuid4()}"
    await resolve(api.images.generate({"prompt": "one", "parameters": SMALL}, idempotency_key=key))
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(
            api.images.generate({"prompt": "two", "parameters": SMALL}, idempotency_key=key)
        )
    assert caught.value.status_code == 409
    assert caught.value.code is ErrorCode.IDEMPOTENCY_CONFLICT
    assert caught.value.error_code == "idempotency_conflict"


async def test_same_idempotency_key_replays_the_same_response(api: Client) -> None:
    key = f"replay-{uuid.uuid4()}"
    body = {"prompt": "replayed", "parameters": SMALL}
    first = await resolve(api.images.generate(body, idempotency_key=key))
    second = await resolve(api.images.generate(body, idempotency_key=key))
    assert second.id == first.id
    assert second.data[0].sha256 == first.data[0].sha256


async def test_rate_limit_carries_retry_after(kind: str, bridge: LiveServer) -> None:
    client = make_client(kind, bridge.url, max_retries=0)
    try:
        with pytest.raises(BridgeAPIError) as caught:
            await resolve(client.images.generate("[mock:fail=rate_limited] fox"))
    finally:
        await close(client)
    error = caught.value
    assert error.status_code == 429
    assert error.code is ErrorCode.RATE_LIMITED
    assert error.retryable is True
    assert error.retry_after == 2.0
    assert error.details["retry_after_ms"] == 2000


async def test_overload_carries_retry_after(kind: str, bridge: LiveServer) -> None:
    client = make_client(kind, bridge.url, max_retries=0)
    try:
        with pytest.raises(BridgeAPIError) as caught:
            await resolve(client.images.generate("[mock:fail=overloaded] fox"))
    finally:
        await close(client)
    assert caught.value.status_code == 503
    assert caught.value.retry_after == 1.0
    assert caught.value.code is ErrorCode.OVERLOADED


# -- retry policy ---------------------------------------------------------------------------------


async def test_retryable_errors_are_retried_honouring_retry_after(
    recorded: Client, recorder: Recorder, waits: list[float]
) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(recorded.images.generate("[mock:fail=overloaded] fox"))
    assert caught.value.code is ErrorCode.OVERLOADED
    posts = image_posts(recorder)
    assert len(posts) == 1 + FAST_RETRY.max_retries
    assert waits == [1.0, 1.0]  # the bridge's Retry-After, not the policy's backoff
    keys = {post.headers["Idempotency-Key"] for post in posts}
    assert len(keys) == 1  # one logical call: one key on every try
    assert next(iter(keys)).startswith("imagebridge-sdk-")


async def test_a_retry_after_longer_than_allowed_is_not_waited_for(
    kind: str, bridge: LiveServer, recorder: Recorder, waits: list[float]
) -> None:
    http = recorder.http_client(kind)
    client = make_client(
        kind,
        bridge.url,
        http_client=http,
        retry=RetryPolicy(max_retries=3, max_retry_after=1.5),
    )
    try:
        with pytest.raises(BridgeAPIError) as caught:
            await resolve(client.images.generate("[mock:fail=rate_limited] fox"))
    finally:
        await close(client)
    assert caught.value.retry_after == 2.0
    assert len(image_posts(recorder)) == 1
    assert waits == []


async def test_unknown_outcome_from_the_bridge_is_never_retried(
    recorded: Client, recorder: Recorder, waits: list[float]
) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(
            recorded.images.generate(
                {"prompt": "fox [mock:fail-output=1]", "parameters": {**SMALL, "n": 2}}
            )
        )
    error = caught.value
    assert error.outcome_unknown
    assert error.details["retry_scope"] == "do_not_retry_full_batch"
    assert len(image_posts(recorder)) == 1
    assert waits == []


async def test_non_retryable_errors_are_not_retried(
    recorded: Client, recorder: Recorder, waits: list[float]
) -> None:
    with pytest.raises(BridgeAPIError):
        await resolve(recorded.images.generate("[mock:fail=safety_rejected] fox"))
    assert len(image_posts(recorder)) == 1
    assert waits == []


async def test_no_idempotency_key_is_invented_when_retries_are_off(
    kind: str, bridge: LiveServer, recorder: Recorder
) -> None:
    http = recorder.http_client(kind)
    client = make_client(kind, bridge.url, http_client=http, max_retries=0, retry=None)
    try:
        await resolve(client.images.generate({"prompt": "fox", "parameters": SMALL}))
        await resolve(client.jobs.create({"prompt": "fox", "parameters": SMALL}))
    finally:
        await close(client)
    assert all("Idempotency-Key" not in r.headers for r in recorder.requests)


async def test_the_body_idempotency_key_is_kept_and_not_duplicated(
    recorded: Client, recorder: Recorder
) -> None:
    body = {"prompt": "fox", "parameters": SMALL, "idempotency_key": f"body-{uuid.uuid4()}"}
    await resolve(recorded.images.generate(body))
    assert "Idempotency-Key" not in image_posts(recorder)[0].headers


# -- rules checked with a scripted transport ---------------------------------------------


def envelope_response(
    error: BridgeError, status: int, *, retry_after: str | None = None
) -> httpx.Response:
    headers = {"x-request-id": "scripted-1"}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    return httpx.Response(status, json=error_envelope(error, "scripted-1"), headers=headers)


Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def scripted(kind: str) -> Callable[[Handler], Client]:
    def build(handler: Handler) -> Client:
        transport = httpx.MockTransport(handler)
        client: Client
        if kind == "async":
            client = AsyncImageBridgeClient(
                "http://127.0.0.1:9", env={}, retry=FAST_RETRY,
                http_client=httpx.AsyncClient(transport=transport),
            )  # fmt: skip
        else:
            client = ImageBridgeClient(
                "http://127.0.0.1:9", env={}, retry=FAST_RETRY,
                http_client=httpx.Client(transport=transport),
            )  # fmt: skip
        return client

    return build


async def test_retryable_error_with_unknown_outcome_is_not_retried(
    scripted: Callable[[Handler], Client], waits: list[float]
) -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        error = BridgeError(
            ErrorCode.UPSTREAM, "lost", retryable=True, details={"outcome": "unknown"}
        )
        return envelope_response(error, 502)

    client = scripted(handler)
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(client.images.generate("fox"))
    assert caught.value.outcome_unknown
    assert len(calls) == 1
    assert waits == []


async def test_a_post_without_idempotency_key_is_never_retried(
    scripted: Callable[[Handler], Client], waits: list[float]
) -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        error = BridgeError(ErrorCode.OVERLOADED, "busy", retryable=True)
        return envelope_response(error, 503, retry_after="1")

    client = scripted(handler)
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(client.presets.create("portrait", {}))
    assert caught.value.code is ErrorCode.OVERLOADED
    assert len(calls) == 1
    assert "Idempotency-Key" not in calls[0].headers


async def test_backoff_without_retry_after_grows_with_jitter(
    scripted: Callable[[Handler], Client], waits: list[float]
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        error = BridgeError(ErrorCode.TIMEOUT, "deadline", retryable=True)
        return httpx.Response(504, json=error_envelope(error, "x"))

    client = scripted(handler)
    with pytest.raises(BridgeAPIError):
        await resolve(client.providers.list())
    assert len(waits) == 2
    assert 0.00075 <= waits[0] <= 0.001
    assert 0.0015 <= waits[1] <= 0.002


async def test_a_proxy_502_on_a_post_is_an_unknown_outcome(
    scripted: Callable[[Handler], Client], waits: list[float]
) -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(502, text="<html>bad gateway</html>")

    client = scripted(handler)
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(client.images.generate("fox"))
    assert caught.value.code is ErrorCode.UPSTREAM
    assert caught.value.status_code == 502
    assert caught.value.outcome_unknown
    assert len(calls) == 1
    calls.clear()
    with pytest.raises(BridgeAPIError):
        await resolve(client.providers.list())  # a GET has no side effects: retried
    assert len(calls) == 3


async def test_malformed_success_bodies_are_protocol_errors(
    scripted: Callable[[Handler], Client],
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"items": "not a list"}, headers={"x-request-id": "r-9"})

    client = scripted(handler)
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(client.providers.list())
    assert caught.value.code is ErrorCode.PROTOCOL
    assert caught.value.request_id == "r-9"
    assert caught.value.retryable is False


async def test_an_unfinished_stream_is_an_unknown_outcome(
    scripted: Callable[[Handler], Client],
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = b'event: started\ndata: {"type":"started"}\n\n: heartbeat\n\n'
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = scripted(handler)
    stream = await resolve(client.images.stream("fox"))
    with pytest.raises(BridgeAPIError) as caught:
        await collect(stream)
    assert caught.value.code is ErrorCode.PROTOCOL
    assert caught.value.outcome_unknown


async def test_unknown_stream_events_are_skipped(scripted: Callable[[Handler], Client]) -> None:
    completed = {
        "type": "completed",
        "response": {
            "id": "x", "created": 1, "provider": "p", "model": "m",
            "requested": {}, "effective": {}, "data": [],
        },
    }  # fmt: skip

    def handler(request: httpx.Request) -> httpx.Response:
        body = (
            'event: started\r\ndata: {"type":"started"}\r\n\r\n'
            "event: future_event\ndata: {}\n\n"
            f"event: completed\ndata: {json.dumps(completed)}\n\n"
        ).encode()
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = scripted(handler)
    events = await collect(await resolve(client.images.stream("fox")))
    assert [event.type for event in events] == ["started", "completed"]


# -- transport failures ---------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_connection_refused_is_retryable_and_never_sent(
    kind: str, recorder: Recorder, waits: list[float]
) -> None:
    http = recorder.http_client(kind)
    client = make_client(kind, f"http://127.0.0.1:{closed_port()}", http_client=http)
    try:
        with pytest.raises(BridgeAPIError) as caught:
            await resolve(client.providers.list())
    finally:
        await close(client)
    error = caught.value
    assert error.code is ErrorCode.UPSTREAM
    assert error.retryable is True
    assert error.status_code is None
    assert not error.outcome_unknown
    assert len(recorder.requests) == 3
    assert len(waits) == 2


async def test_a_read_timeout_on_a_generation_is_an_unknown_outcome(
    kind: str, bridge: LiveServer, recorder: Recorder, waits: list[float]
) -> None:
    http = recorder.http_client(kind)
    client = make_client(kind, bridge.url, http_client=http, timeout=0.3)
    try:
        with pytest.raises(BridgeAPIError) as caught:
            await resolve(client.images.generate("[mock:latency=1500] slow fox"))
    finally:
        await close(client)
    error = caught.value
    assert error.code is ErrorCode.TIMEOUT
    assert error.outcome_unknown
    assert error.retryable is False
    assert len(image_posts(recorder)) == 1
    assert waits == []


# -- size bounds ---------------------------------------------------------------------------


async def test_responses_beyond_the_size_bound_are_refused(kind: str, bridge: LiveServer) -> None:
    client = make_client(kind, bridge.url, max_response_bytes=3000)
    try:
        with pytest.raises(BridgeAPIError) as caught:
            await resolve(
                client.images.generate({"prompt": "fox", "parameters": {"size": "256x256"}})
            )
        assert caught.value.code is ErrorCode.PROTOCOL
        assert caught.value.details["maximum_bytes"] == 3000
        assert caught.value.suggestions
        assert await resolve(client.health.live()) is True  # small answers still pass
    finally:
        await close(client)


async def test_stream_events_beyond_the_size_bound_are_refused(
    kind: str, bridge: LiveServer
) -> None:
    client = make_client(kind, bridge.url, max_response_bytes=3000)
    try:
        stream = await resolve(
            client.images.stream({"prompt": "fox", "parameters": {"size": "256x256"}})
        )
        with pytest.raises(BridgeAPIError) as caught:
            await collect(stream)
    finally:
        await close(client)
    assert caught.value.code is ErrorCode.PROTOCOL
    assert caught.value.details["maximum_bytes"] == 3000


async def test_a_declared_length_beyond_the_bound_is_refused_unread(kind: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"{}" * 100)

    transport = httpx.MockTransport(handler)
    client: Client
    if kind == "async":
        client = AsyncImageBridgeClient(
            "http://127.0.0.1:9", env={}, max_response_bytes=10,
            http_client=httpx.AsyncClient(transport=transport),
        )  # fmt: skip
    else:
        client = ImageBridgeClient(
            "http://127.0.0.1:9", env={}, max_response_bytes=10,
            http_client=httpx.Client(transport=transport),
        )  # fmt: skip
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(client.diagnostics())
    assert caught.value.details["maximum_bytes"] == 10
