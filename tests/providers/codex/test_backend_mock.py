"""The loopback Codex backend mock behaves like the real one, fault by fault.

Only a plain httpx client talks to it here, so these tests pin the mock itself; the
bridge's own parsing of its answers is tested in ``tests/providers/codex/test_wire.py``.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.support.codex_backend import (
    FIXTURE_SSE_PATH,
    REDACTED,
    Behaviour,
    CodexBackend,
    Route,
    codex_backend_fixture,  # noqa: F401 - registers the `codex_backend` fixture
    token_sha256,
)

TOKEN = "tok-mock-secret-123"
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "ChatGPT-Account-Id": "acct-mock-secret",
    "originator": "imagegen-bridge",
    "Accept": "text/event-stream",
    "Content-Type": "application/json",
}


def responses_body(**tool: Any) -> dict[str, Any]:
    return {
        "model": "gpt-5.5",
        "input": [{"type": "message", "role": "user", "content": []}],
        "tools": [{"type": "image_generation", "model": "gpt-image-2", **tool}],
        "stream": True,
    }


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5.0) as http:
        yield http


def sse_payloads(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) per SSE block; non-JSON data kept as text."""
    out: list[tuple[str | None, Any]] = []
    for block in raw.decode().split("\n\n"):
        name = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            text = "\n".join(data)
            try:
                out.append((name, json.loads(text)))
            except ValueError:
                out.append((name, text))
    return out


def decode_image(b64: str) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(b64)))
    image.load()
    return image


def post_responses(
    client: httpx.Client, backend: CodexBackend, body: dict[str, Any] | None = None
) -> httpx.Response:
    return client.post(backend.responses_url, headers=HEADERS, json=body or responses_body())


# -- the success stream ------------------------------------------------------------------------


def test_listens_on_loopback_only(codex_backend: CodexBackend) -> None:
    assert codex_backend.origin.startswith("http://127.0.0.1:")
    assert codex_backend.responses_url.endswith("/backend-api/codex/responses")
    assert codex_backend.usage_url.endswith("/backend-api/wham/usage")


def test_ok_replays_the_recorded_stream_with_real_images(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    response = post_responses(client, codex_backend)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    recorded = sse_payloads(FIXTURE_SSE_PATH.read_bytes())
    replayed = sse_payloads(response.content)
    assert [(name, _type(data)) for name, data in replayed] == [
        (name, _type(data)) for name, data in recorded
    ]
    partial, done, unknown, completed, sentinel = (data for _, data in replayed)
    final = decode_image(done["item"]["result"])
    assert (final.format, final.size) == ("PNG", (64, 64))
    assert decode_image(partial["partial_image_b64"]).size == (64, 64)
    assert done["item"]["revised_prompt"] == "revised"
    assert unknown == recorded[2][1]
    assert completed == recorded[3][1]
    assert sentinel == "[DONE]"
    assert response.content.startswith(b": heartbeat\n\n")


def _type(data: Any) -> Any:
    return data.get("type") if isinstance(data, dict) else data


def test_image_follows_the_requested_size_and_background(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    body = responses_body(size="320x200", background="transparent")
    payloads = sse_payloads(post_responses(client, codex_backend, body).content)
    image = decode_image(payloads[1][1]["item"]["result"])
    assert image.size == (320, 200)
    assert image.mode == "RGBA"
    assert image.getpixel((0, 0))[3] == 0  # type: ignore[index]


def test_requested_partial_images_are_numbered(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    payloads = sse_payloads(
        post_responses(client, codex_backend, responses_body(partial_images=3)).content
    )
    partials = [data for _, data in payloads if _type(data).endswith("partial_image")]
    assert [p["partial_image_index"] for p in partials] == [0, 1, 2]


def test_output_format_is_png_unless_asked_to_honour_it(client: httpx.Client) -> None:
    with CodexBackend(honour_output_format=True) as backend:
        body = responses_body(output_format="webp")
        payloads = sse_payloads(post_responses(client, backend, body).content)
        assert decode_image(payloads[1][1]["item"]["result"]).format == "WEBP"
    with CodexBackend() as backend:
        payloads = sse_payloads(post_responses(client, backend, body).content)
        assert decode_image(payloads[1][1]["item"]["result"]).format == "PNG"


def test_content_type_can_be_omitted_like_the_private_endpoint(client: httpx.Client) -> None:
    with CodexBackend(sse_content_type=None) as backend:
        response = post_responses(client, backend)
    assert response.status_code == 200
    assert "content-type" not in response.headers
    assert b"response.completed" in response.content


def test_generation_answers_carry_rate_limit_headers(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    codex_backend.quota.primary_used_percent = 37.5
    before = int(time.time())
    response = post_responses(client, codex_backend)
    assert response.headers["x-codex-primary-used-percent"] == "37.5"
    assert response.headers["x-codex-primary-window-minutes"] == "300"
    assert response.headers["x-codex-secondary-window-minutes"] == "10080"
    assert int(response.headers["x-codex-primary-reset-at"]) >= before + 3_600
    assert response.headers["x-codex-plan-type"] == "plus"
    assert response.headers["x-oai-request-id"].startswith("req_")


# -- the images and usage routes -----------------------------------------------------------------


@pytest.mark.parametrize("route", ["generations", "edits"])
def test_images_routes_answer_json_with_a_real_image(
    codex_backend: CodexBackend, client: httpx.Client, route: str
) -> None:
    url = (
        codex_backend.images_generations_url
        if route == "generations"
        else codex_backend.images_edits_url
    )
    body = {
        "prompt": "p",
        "background": "auto",
        "model": "gpt-image-2",
        "quality": "auto",
        "size": "96x48",
    }
    response = client.post(url, headers=HEADERS, json=body)
    assert response.status_code == 200
    payload = response.json()
    assert decode_image(payload["data"][0]["b64_json"]).size == (96, 48)
    assert payload["usage"]["total_tokens"] == 46
    assert response.headers["x-codex-imagegen-request-id"].startswith("req_")
    assert "x-codex-secondary-used-percent" in response.headers


def test_usage_route_reports_windows_and_identifying_fields(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    payload = client.get(codex_backend.usage_url, headers=HEADERS).json()
    assert payload["plan_type"] == "plus"
    assert payload["rate_limit"]["primary_window"]["limit_window_seconds"] == 18_000
    assert payload["rate_limit"]["secondary_window"]["used_percent"] == 40.0
    assert payload["email"].endswith("@example.invalid")  # a client must drop it
    assert codex_backend.calls("usage") == 1


def test_unknown_path_is_404_and_wrong_method_405(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    assert client.get(f"{codex_backend.base_url}/nope").status_code == 404
    assert client.get(codex_backend.responses_url).status_code == 405
    assert [r.route for r in codex_backend.requests] == [None, None]
    assert codex_backend.call_counts == dict.fromkeys(
        ("responses", "images_generations", "images_edits", "usage"), 0
    )


# -- HTTP faults ----------------------------------------------------------------------------------

ROUTES: list[Route] = ["responses", "images_generations", "images_edits", "usage"]


def call(client: httpx.Client, backend: CodexBackend, route: Route) -> httpx.Response:
    if route == "usage":
        return client.get(backend.usage_url, headers=HEADERS)
    url = {
        "responses": backend.responses_url,
        "images_generations": backend.images_generations_url,
        "images_edits": backend.images_edits_url,
    }[route]
    return client.post(url, headers=HEADERS, json=responses_body())


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    ("kind", "status"),
    [
        ("http_401", 401),
        ("http_403", 403),
        ("http_429", 429),
        ("http_500", 500),
        ("http_502", 502),
        ("http_503", 503),
    ],
)
def test_http_faults_on_every_route(
    codex_backend: CodexBackend, client: httpx.Client, route: Route, kind: str, status: int
) -> None:
    codex_backend.script(kind, route=route)
    assert call(client, codex_backend, route).status_code == status
    assert call(client, codex_backend, route).status_code == 200  # the queue is spent
    assert codex_backend.calls(route) == 2


def test_429_is_the_usage_limit_answer(codex_backend: CodexBackend, client: httpx.Client) -> None:
    codex_backend.quota.limit_resets_in_s = 900
    codex_backend.script("http_429")
    now = int(time.time())
    response = post_responses(client, codex_backend)
    error = response.json()["error"]
    assert error["type"] == "usage_limit_reached"
    assert now + 900 <= error["resets_at"] <= now + 902
    assert error["resets_in_seconds"] == 900
    assert response.headers["retry-after"] == "900"
    assert response.headers["x-codex-primary-used-percent"] == "100"


def test_502_is_an_html_proxy_page(codex_backend: CodexBackend, client: httpx.Client) -> None:
    codex_backend.script("http_502")
    response = post_responses(client, codex_backend)
    assert response.headers["content-type"] == "text/html"


# -- stream faults ---------------------------------------------------------------------------------


def stream_events(
    client: httpx.Client, backend: CodexBackend, behaviour: Behaviour | str
) -> list[Any]:
    backend.script(behaviour)
    return [data for _, data in sse_payloads(post_responses(client, backend).content)]


def test_failed_image_call(codex_backend: CodexBackend, client: httpx.Client) -> None:
    events = stream_events(client, codex_backend, "failed_image_call")
    assert events[-1]["response"]["output"][0] == {
        "type": "image_generation_call",
        "id": "ig_mock",
        "status": "failed",
        "result": "",
    }


def test_completed_without_image(codex_backend: CodexBackend, client: httpx.Client) -> None:
    events = stream_events(client, codex_backend, "completed_without_image")
    assert _type(events[-1]) == "response.completed"
    assert [item["type"] for item in events[-1]["response"]["output"]] == ["message"]


def test_content_policy_refusal_is_a_failed_response(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    events = stream_events(client, codex_backend, "content_policy_refusal")
    assert _type(events[-1]) == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "content_policy_violation"


def test_refusal_message_completes_with_a_refusal_part(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    events = stream_events(client, codex_backend, "refusal_message")
    assert events[-1]["response"]["output"][0]["content"][0]["type"] == "refusal"


def test_usage_limit_in_stream_is_an_error_event(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    events = stream_events(client, codex_backend, "usage_limit_in_stream")
    assert events[-1]["type"] == "error"
    assert events[-1]["error"]["code"] == "usage_limit_reached"
    assert events[-1]["error"]["resets_at"] > time.time()


def test_malformed_json_sends_a_data_line_that_is_not_json(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    events = stream_events(client, codex_backend, "malformed_json")
    assert isinstance(events[0], str)
    with pytest.raises(ValueError, match="Expecting value"):
        json.loads(events[0])


@pytest.mark.parametrize("route", ["images_generations", "usage"])
def test_malformed_json_on_json_routes(
    codex_backend: CodexBackend, client: httpx.Client, route: Route
) -> None:
    codex_backend.script("malformed_json", route=route)
    response = call(client, codex_backend, route)
    assert response.status_code == 200
    with pytest.raises(ValueError, match=r"Expecting|Unterminated"):
        json.loads(response.content)


def test_images_route_faults_look_like_the_images_api(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    codex_backend.script(
        "content_policy_refusal",
        "failed_image_call",
        "completed_without_image",
        route="images_generations",
    )
    refusal = call(client, codex_backend, "images_generations")
    assert (refusal.status_code, refusal.json()["error"]["code"]) == (400, "moderation_blocked")
    failed = call(client, codex_backend, "images_generations")
    assert (failed.status_code, failed.json()["error"]["code"]) == (500, "image_generation_failed")
    empty = call(client, codex_backend, "images_generations")
    assert (empty.status_code, empty.json()["data"]) == (200, [])


def test_slow_ok_delays_the_stream(codex_backend: CodexBackend, client: httpx.Client) -> None:
    codex_backend.script(Behaviour.slow_ok(0.3))
    started = time.monotonic()
    with client.stream(
        "POST", codex_backend.responses_url, headers=HEADERS, json=responses_body()
    ) as response:
        chunks = response.iter_raw()
        first = next(chunks)
        first_at = time.monotonic() - started
        rest = b"".join(chunks)
    assert b"heartbeat" in first
    assert first_at < 0.25
    assert time.monotonic() - started >= 0.3
    assert b"response.completed" in rest


def read_stream(
    client: httpx.Client, backend: CodexBackend, into: bytearray, timeout: float = 5.0
) -> None:
    """Stream a Responses call into ``into`` (kept when the stream fails midway)."""
    with client.stream(
        "POST", backend.responses_url, headers=HEADERS, json=responses_body(), timeout=timeout
    ) as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            into += chunk


def test_disconnect_before_first_byte(codex_backend: CodexBackend, client: httpx.Client) -> None:
    codex_backend.script("disconnect_before_first_byte")
    with pytest.raises(httpx.RemoteProtocolError):
        post_responses(client, codex_backend)
    assert codex_backend.calls("responses") == 1
    assert post_responses(client, codex_backend).status_code == 200


def test_disconnect_mid_stream_cuts_the_chunked_body(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    codex_backend.script("disconnect_mid_stream")
    received = bytearray()
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        read_stream(client, codex_backend, received)
    assert b"partial_image" in received
    assert b"response.completed" not in received


def test_disconnect_mid_body_on_images_route(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    codex_backend.script("disconnect_mid_stream", route="images_edits")
    with pytest.raises(httpx.RemoteProtocolError):
        call(client, codex_backend, "images_edits")


def test_stall_sends_nothing_until_released(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    codex_backend.script("stall")
    with pytest.raises(httpx.ReadTimeout):
        client.post(
            codex_backend.responses_url, headers=HEADERS, json=responses_body(), timeout=0.3
        )
    assert codex_backend.calls("responses") == 1
    outcome: list[BaseException] = []

    def blocked_call() -> None:
        codex_backend.script("stall")
        try:
            post_responses(client, codex_backend)
        except httpx.HTTPError as error:
            outcome.append(error)

    worker = threading.Thread(target=blocked_call)
    worker.start()
    assert codex_backend.wait_for_calls(2, timeout=5)
    codex_backend.release()
    worker.join(timeout=5)
    assert not worker.is_alive()
    assert isinstance(outcome[0], httpx.RemoteProtocolError)


def test_stall_mid_stream_keeps_the_connection_silent(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    codex_backend.script("stall_mid_stream")
    received = bytearray()
    with pytest.raises(httpx.ReadTimeout):
        read_stream(client, codex_backend, received, timeout=0.5)
    assert b"partial_image" in received
    codex_backend.release()


def test_close_cuts_off_a_stalled_call_promptly(client: httpx.Client) -> None:
    backend = CodexBackend(stall_timeout_s=60).start()
    backend.script("stall")
    errors: list[BaseException] = []

    def blocked() -> None:
        try:
            post_responses(client, backend)
        except httpx.HTTPError as error:
            errors.append(error)

    worker = threading.Thread(target=blocked)
    worker.start()
    assert backend.wait_for_calls(1, timeout=5)
    started = time.monotonic()
    backend.close()
    worker.join(timeout=30)
    assert time.monotonic() - started < 30  # half the 60 s stall it must not wait for
    assert errors and isinstance(errors[0], httpx.TransportError)


# -- scripting and recording -----------------------------------------------------------------------


def test_queue_then_default_per_route(codex_backend: CodexBackend, client: httpx.Client) -> None:
    codex_backend.set_default("http_503")
    codex_backend.script("ok", "http_401")
    statuses = [post_responses(client, codex_backend).status_code for _ in range(3)]
    assert statuses == [200, 401, 503]
    assert call(client, codex_backend, "images_generations").status_code == 200
    assert [r.behaviour for r in codex_backend.requests_for("responses")] == [
        "ok",
        "http_401",
        "http_503",
    ]


def test_unknown_behaviour_is_refused_up_front() -> None:
    with pytest.raises(ValueError, match="unknown mock behaviour"):
        Behaviour("explode")  # type: ignore[arg-type]


def test_requests_are_recorded_with_secrets_redacted(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    body = responses_body(size="1024x1024")
    client.post(f"{codex_backend.responses_url}?trace=1", headers=HEADERS, json=body)
    (request,) = codex_backend.requests
    assert (request.method, request.path, request.route, request.query) == (
        "POST",
        "/backend-api/codex/responses",
        "responses",
        "trace=1",
    )
    assert request.body == body
    assert request.headers["authorization"] == REDACTED
    assert request.headers["chatgpt-account-id"] == REDACTED
    assert request.headers["originator"] == "imagegen-bridge"
    assert request.has_bearer and request.sent_token(TOKEN)
    assert not request.sent_token("another-token")
    assert request.authorization_sha256 == token_sha256(TOKEN)
    assert request.sent_account_id("acct-mock-secret")
    assert TOKEN not in repr(request)
    assert "acct-mock-secret" not in repr(request)


def test_request_without_bearer_is_recorded_as_such(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    client.get(codex_backend.usage_url)
    assert codex_backend.requests[0].has_bearer is False


def test_expected_token_rejects_other_tokens_with_401(client: httpx.Client) -> None:
    with CodexBackend(expected_token=TOKEN) as backend:
        assert post_responses(client, backend).status_code == 200
        other = {**HEADERS, "Authorization": "Bearer stale"}
        rejected = client.post(backend.responses_url, headers=other, json=responses_body())
        assert rejected.status_code == 401
        assert rejected.json()["error"]["code"] == "token_expired"
        assert [r.behaviour for r in backend.requests] == ["ok", "auth_rejected"]


def test_reset_forgets_requests_and_scripts(
    codex_backend: CodexBackend, client: httpx.Client
) -> None:
    codex_backend.script("http_500", "http_500")
    codex_backend.set_default("http_502", route="usage")
    post_responses(client, codex_backend)
    codex_backend.reset()
    assert codex_backend.requests == []
    assert post_responses(client, codex_backend).status_code == 200
    assert call(client, codex_backend, "usage").status_code == 200


def test_concurrent_calls_are_all_counted(codex_backend: CodexBackend) -> None:
    def one() -> int:
        with httpx.Client(timeout=5) as http:
            return post_responses(http, codex_backend).status_code

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert codex_backend.calls("responses") == 8
