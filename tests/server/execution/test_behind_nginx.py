"""Behind a real reverse proxy whose read timeout is shorter than the generation (issue 39).

Debian's nginx runs on 127.0.0.1 in front of the bridge with ``proxy_read_timeout 5s``
(tests/support/nginx.py); each generation takes 12 s, on the mock provider and on the Codex
backend mock. What a user of the newest ``openai`` SDK sees:

* with its default retries and timeouts it gets the image: nginx answers the first
  attempts 504, the SDK retries (``x-stainless-retry-count``), the retries join the first
  attempt's generation (which went on after nginx cut it), and the provider ran once;
* with ``max_retries=0`` it gets nginx's 504, and the image is then in the history,
  fetchable by its id;
* streamed (``stream: true``, and the native ``/v1/images/stream``) the heartbeats keep the
  connection alive through the proxy and the image arrives on the first attempt.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_of
from tests.support.codex_backend import (
    Behaviour,
    CodexBackend,
    codex_responses_sets,
)
from tests.support.nginx import NginxProxy, nginx_proxy, require_nginx
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.nginx, pytest.mark.slow, pytest.mark.timeout(240)]

GENERATION_S = 12
PROXY_READ_TIMEOUT_S = 5
HEARTBEAT = "server.stream_heartbeat_ms=2000"  # below the proxy's read timeout


@dataclass
class Bridge:
    """A bridge behind nginx, and how many provider calls it has made."""

    server: LiveServer
    proxy: NginxProxy
    calls: Callable[[], int]
    prompt: str

    def sdk(self, **options: Any) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.proxy.url}/v1", api_key="unused", **options)


def _mock_bridge(serve: ServeFactory, tmp_path: Path) -> Iterator[Bridge]:
    server = serve(HEARTBEAT)
    mock = mock_of(server)
    with nginx_proxy(tmp_path / "nginx", [server.url], read_timeout_s=PROXY_READ_TIMEOUT_S) as px:
        yield Bridge(
            server, px, lambda: mock.calls, f"[mock:latency={GENERATION_S * 1000}] a slow pier"
        )


def _codex_bridge(
    serve: ServeFactory,
    tmp_path: Path,
    codex_backend: CodexBackend,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Bridge]:
    server = serve(*codex_responses_sets(codex_backend, tmp_path, monkeypatch), HEARTBEAT)
    codex_backend.set_default(Behaviour.slow_ok(GENERATION_S))
    with nginx_proxy(tmp_path / "nginx", [server.url], read_timeout_s=PROXY_READ_TIMEOUT_S) as px:
        yield Bridge(server, px, lambda: codex_backend.calls("responses"), "a slow pier")


@pytest.fixture(params=["mock", "codex"])
def bridge(
    request: pytest.FixtureRequest,
    serve: ServeFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Bridge]:
    require_nginx()
    if request.param == "mock":
        yield from _mock_bridge(serve, tmp_path)
    else:
        backend = request.getfixturevalue("codex_backend")
        yield from _codex_bridge(serve, tmp_path, backend, monkeypatch)


def _finished_record(server: LiveServer) -> dict[str, Any]:
    with server.client() as client:
        assert wait_until(
            lambda: [i["status"] for i in client.get("/v1/jobs").json()["items"]] == ["succeeded"],
            timeout=GENERATION_S + 10,
        )
        [item] = client.get("/v1/jobs").json()["items"]
        record: dict[str, Any] = client.get(f"/v1/jobs/{item['id']}").json()
        return record


def test_the_sdk_with_its_default_retries_gets_the_image_and_the_provider_runs_once(
    bridge: Bridge,
) -> None:
    started = time.monotonic()
    image = bridge.sdk().images.generate(prompt=bridge.prompt, size="1024x1024")
    took = time.monotonic() - started
    assert image.data is not None and image.data[0].b64_json
    assert base64.b64decode(image.data[0].b64_json).startswith(b"\x89PNG")
    assert took > GENERATION_S  # it did outlast the proxy's read timeout, twice
    assert bridge.calls() == 1
    # nginx cut the first attempts: the SDK saw its 504s and retried, marked as retries
    statuses = [status for status, _ in bridge.proxy.answers(at_least=2, ending_with=200)]
    assert statuses.count(504) >= 1 and statuses[-1] == 200, statuses
    record = _finished_record(bridge.server)
    assert record["request"]["prompt"] == bridge.prompt


def test_without_retries_the_sdk_gets_the_proxys_504_and_the_image_is_kept(
    bridge: Bridge,
) -> None:
    with pytest.raises(openai.InternalServerError) as cut:
        bridge.sdk(max_retries=0).images.generate(prompt=bridge.prompt, size="1024x1024")
    assert cut.value.status_code == 504
    assert bridge.calls() == 1
    record = _finished_record(bridge.server)
    assert record["request"]["prompt"] == bridge.prompt
    [image] = record["result"]["data"]
    assert image["type"] == "artifact"
    with bridge.server.client() as client:
        fetched = client.get(f"/v1/artifacts/{image['id']}")
        again = client.get(f"/v1/jobs/{record['id']}")
    assert fetched.status_code == 200 and fetched.content.startswith(b"\x89PNG")
    assert again.status_code == 200 and again.json()["result"] == record["result"]
    assert bridge.calls() == 1


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if lines:
            events.append((lines[0].removeprefix("event: "), json.loads(lines[1][6:])))
    return events


def test_streams_outlive_the_proxy_read_timeout_on_their_heartbeats(bridge: Bridge) -> None:
    """Both streams deliver a 12 s generation through the 5 s proxy on their first
    attempt: the heartbeats (every 2 s here) are what keeps nginx reading."""
    stream = bridge.sdk(max_retries=0).images.generate(
        prompt=bridge.prompt, size="1024x1024", stream=True
    )
    completed = [event for event in stream if event.type == "image_generation.completed"]
    assert len(completed) == 1 and completed[0].b64_json
    with httpx.Client(base_url=bridge.proxy.url, timeout=60) as client:
        native = client.post(
            "/v1/images/stream",
            json={"operation": "generate", "prompt": bridge.prompt,
                  "parameters": {"size": "1024x1024"}},
        )  # fmt: skip
    assert native.status_code == 200
    assert ": heartbeat" in native.text
    names = [name for name, _ in _events(native.text)]
    assert names[0] == "started" and names[-1] == "completed", names
    assert bridge.calls() == 2  # one generation per stream, no retry needed
    assert [status for status, _ in bridge.proxy.answers(at_least=2)] == [200, 200]


def _read_stream(base_url: str, body: dict[str, Any]) -> tuple[int, bytes, str]:
    """A native stream read to its end: status, bytes, and ``done`` or ``cut``."""
    received = b""
    with (
        httpx.Client(base_url=base_url, timeout=60) as client,
        client.stream("POST", "/v1/images/stream", json=body) as answer,
    ):
        try:
            for chunk in answer.iter_bytes():
                received += chunk
        except httpx.RemoteProtocolError:
            return answer.status_code, received, "cut"
        return answer.status_code, received, "done"


def test_a_stream_without_heartbeats_in_time_is_cut_by_the_proxy_and_kept(
    serve: ServeFactory, tmp_path: Path
) -> None:
    """The control: heartbeats slower than the proxy's read timeout do not keep the stream
    alive (nginx cuts it), and the generation, begun, is kept in the history anyway."""
    require_nginx()
    server = serve("server.stream_heartbeat_ms=30000")
    mock = mock_of(server)
    prompt = "[mock:latency=8000] a cut stream"
    with nginx_proxy(tmp_path / "nginx", [server.url], read_timeout_s=PROXY_READ_TIMEOUT_S) as px:
        body = {"operation": "generate", "prompt": prompt, "parameters": {"size": "8x8"}}
        status, received, ended = _read_stream(px.url, body)
        assert status == 200 and ended == "cut"  # nginx ended the chunked body early
        assert b"event: started" in received and b"event: completed" not in received
    record = _finished_record(server)
    assert record["request"]["prompt"] == prompt
    assert mock.calls == 1 and mock.cancellations == 0
