"""Never charge twice: the official ``openai`` SDK at its DEFAULT retries runs a provider once.

The SDK retries every 5xx (and 408/409/429) twice unless the answer's ``x-should-retry``
header says otherwise. The mock provider counts its runs; the client counts the HTTP requests
it sent through an httpx event hook.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_of
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def server(serve_module: ServeFactory) -> LiveServer:
    return serve_module()


class Counted:
    """An SDK client at its default ``max_retries`` and the requests it sent."""

    def __init__(self, server: LiveServer) -> None:
        self.sent = 0
        self.http = httpx.Client(event_hooks={"request": [self._count]}, timeout=60)
        self.sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", http_client=self.http)
        assert self.sdk.max_retries == 2  # the SDK's default, which these tests are about

    def _count(self, request: httpx.Request) -> None:
        self.sent += 1


@pytest.fixture
def client(server: LiveServer) -> Iterator[Counted]:
    counted = Counted(server)
    yield counted
    counted.http.close()


def test_a_provider_5xx_after_the_call_began_runs_the_provider_once(
    server: LiveServer, client: Counted
) -> None:
    mock = mock_of(server)
    before = mock.calls
    with pytest.raises(openai.InternalServerError) as caught:
        client.sdk.images.generate(prompt="[mock:fail=upstream] fox", size="8x8")
    assert caught.value.status_code == 502
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert mock.calls == before + 1
    assert client.sent == 1


def test_an_unknown_outcome_runs_the_provider_once(server: LiveServer, client: Counted) -> None:
    mock = mock_of(server)
    before = mock.calls
    with pytest.raises(openai.APIStatusError) as caught:
        client.sdk.images.generate(prompt="[mock:fail=timeout] fox", size="8x8")
    assert caught.value.status_code == 504
    body = caught.value.response.json()["error"]["imagegen_bridge"]
    assert body["details"]["outcome"] == "unknown"
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert mock.calls == before + 1
    assert client.sent == 1


def test_transparent_jpeg_is_refused_before_any_provider_run(
    server: LiveServer, client: Counted
) -> None:
    mock = mock_of(server)
    before = mock.calls
    with pytest.raises(openai.BadRequestError) as caught:
        client.sdk.images.generate(
            prompt="a glass fox", size="8x8", background="transparent", output_format="jpeg"
        )
    assert caught.value.status_code == 400
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert mock.calls == before
    assert client.sent == 1


def test_a_rate_limit_says_retry_and_when(server: LiveServer) -> None:
    with server.client() as raw:
        response = raw.post(
            "/v1/images/generations", json={"prompt": "[mock:fail=rate_limited] x", "size": "8x8"}
        )
    assert response.status_code == 429
    assert response.headers["x-should-retry"] == "true"
    assert response.headers["retry-after"] == "2"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/images", {"operation": "generate"}),  # a caller mistake, 422
        ("GET", "/v1/jobs/job_missing", None),  # 404
        ("GET", "/v1/no-such-route", None),  # routing 404
        ("POST", "/v1/images/generations", {"prompt": 7}),
    ],
)
def test_every_error_answer_carries_x_should_retry(
    server: LiveServer, method: str, path: str, body: object
) -> None:
    with server.client() as raw:
        response = raw.request(method, path, json=body)
    assert response.status_code >= 400
    assert response.headers["x-should-retry"] == "false"


def test_a_full_queue_says_retry(serve: ServeFactory) -> None:
    live = serve("runtime.global.max_concurrent=1", "runtime.global.max_queued=0")
    with live.client() as raw:
        slow = threading.Thread(
            target=raw.post,
            args=("/v1/images/generations",),
            kwargs={"json": {"prompt": "[mock:latency=3000] slow", "size": "8x8"}},
        )
        slow.start()
        try:
            mock = mock_of(live)
            assert wait_until(lambda: mock.in_flight == 1, timeout=20)
            refused = raw.post("/v1/images/generations", json={"prompt": "x", "size": "8x8"})
        finally:
            slow.join(timeout=30)
    assert refused.status_code == 503
    assert refused.headers["x-should-retry"] == "true"
    assert int(refused.headers["retry-after"]) >= 1
