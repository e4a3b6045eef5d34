"""A black-box checklist of the original's observable behaviours, one test per item (the number
in a test's name is its item), against a real server (the jobs/presets items 34–42 are in
``test_jobs_checklist.py``).

Unless a test says otherwise the server registers the deterministic provider ``ready``
(count 1–2, auto size, png only, 1×1 PNG) as its default, plus ``mock`` and a
``codex-fake`` provider without mask support.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import uuid
from typing import Any

import httpx
import pytest

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import (
    UnreadyProvider,
    codex_fake,
    png,
    png_b64,
    ready_provider,
    with_mock,
)
from tests.support.fakes import FakeProvider
from tests.support.waiting import wait_until

TOKEN = "checklist-secret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GENERATE = {"operation": "generate", "prompt": "test"}
SMALL = {"size": "8x8"}


@pytest.fixture(scope="module")
def standard(serve_module: ServeFactory) -> LiveServer:
    return serve_module(
        'default_provider="ready"',
        providers=with_mock(ready_provider(), codex_fake()),
    )


@pytest.fixture(scope="module")
def guarded(serve_module: ServeFactory) -> LiveServer:
    return serve_module(
        'server.bearer_token_env="BRIDGE_TOKEN"',
        "server.metrics.enabled=true",
        env={"BRIDGE_TOKEN": TOKEN},
    )


def post(server: LiveServer, path: str, body: Any, **kwargs: Any) -> httpx.Response:
    with server.client() as client:
        return client.post(path, json=body, **kwargs)


def get(server: LiveServer, path: str, **kwargs: Any) -> httpx.Response:
    with server.client() as client:
        return client.get(path, **kwargs)


def native(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()["error"]["imagegen_bridge"]
    return body


def issues(response: httpx.Response) -> list[tuple[str, str]]:
    return [(i["field"], i["code"]) for i in native(response)["details"]["issues"]]


def is_uuid7(value: str) -> bool:
    try:
        return uuid.UUID(value).version == 7
    except ValueError:
        return False


def test_01_health_live_is_public_and_carries_ids(guarded: LiveServer) -> None:
    response = get(guarded, "/health/live")
    assert response.status_code == 200
    assert response.json() == {"status": "live"}
    assert is_uuid7(response.headers["x-request-id"])
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", response.headers["traceparent"])


def test_02_health_ready_follows_the_cached_probe(serve: ServeFactory) -> None:
    healthy = serve()
    assert wait_until(lambda: healthy.state.readiness.probed)
    response = get(healthy, "/health/ready")
    assert (response.status_code, response.json()) == (200, {"status": "ready"})
    assert "retry-after" not in response.headers

    failing = serve('default_provider="broken"', providers=[UnreadyProvider("broken")])
    assert wait_until(lambda: failing.state.readiness.probed)
    response = get(failing, "/health/ready")
    assert (response.status_code, response.json()) == (503, {"status": "not_ready"})
    assert (response.headers["x-should-retry"], response.headers["retry-after"]) == ("true", "1")


def test_03_missing_bearer_is_401_with_challenge(guarded: LiveServer) -> None:
    response = get(guarded, "/v1/providers")
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "authentication_required"
    assert error["type"] == "authentication_error"
    assert error["imagegen_bridge"]["code"] == "authentication"
    assert response.headers["www-authenticate"] == 'Bearer realm="imagegen-bridge"'


@pytest.mark.parametrize(
    ("header", "status"),
    [
        (f"bearer {TOKEN}", 401),
        ("Bearer wrong-token", 401),
        (f"Bearer  {TOKEN}", 401),
        (f"Bearer {TOKEN}", 200),
    ],
)
def test_04_bearer_must_match_exactly(guarded: LiveServer, header: str, status: int) -> None:
    assert get(guarded, "/v1/providers", headers={"Authorization": header}).status_code == status


def test_05_cross_origin_browser_requests_are_refused(guarded: LiveServer) -> None:
    hostile = {"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site", **AUTH}
    response = get(guarded, "/v1/providers", headers=hostile)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert response.json()["error"]["message"] == "cross-origin browser requests are not allowed"
    host = f"127.0.0.1:{guarded.port}"
    same = {"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin", **AUTH}
    assert get(guarded, "/v1/providers", headers=same).status_code == 200


def test_06_caller_request_id_is_echoed_everywhere(standard: LiveServer) -> None:
    headers = {"x-request-id": "caller-request-7"}
    failed = post(standard, "/v1/images", {"operation": "generate", "prompt": ""}, headers=headers)
    assert failed.headers["x-request-id"] == "caller-request-7"
    assert failed.json()["request_id"] == "caller-request-7"
    done = post(standard, "/v1/images", GENERATE, headers=headers)
    assert done.status_code == 200
    assert done.headers["x-request-id"] == "caller-request-7"
    assert done.json()["id"] == "caller-request-7"


@pytest.mark.parametrize("bad", ["has space", "x" * 129, "semi;colon"])
def test_07_unsafe_request_ids_are_replaced(standard: LiveServer, bad: str) -> None:
    response = get(standard, "/v1/providers", headers={"x-request-id": bad})
    assert is_uuid7(response.headers["x-request-id"])


def test_08_traceparent_keeps_trace_and_flags_with_a_new_span(standard: LiveServer) -> None:
    inbound = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    outbound = get(standard, "/v1/providers", headers={"traceparent": inbound}).headers[
        "traceparent"
    ]
    assert outbound.startswith("00-4bf92f3577b34da6a3ce929d0e0e4736-")
    assert outbound.endswith("-01")
    assert outbound != inbound
    invalid = "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
    fresh = get(standard, "/v1/providers", headers={"traceparent": invalid}).headers["traceparent"]
    assert not fresh.startswith("00-0000") and fresh.endswith("-01")


def test_09_unknown_route_and_wrong_method_use_the_envelope(standard: LiveServer) -> None:
    missing = get(standard, "/missing")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "invalid_request"
    assert missing.json()["error"]["message"] == "route was not found"
    with standard.client() as client:
        wrong = client.put("/v1/providers")
    assert wrong.status_code == 405
    assert wrong.json()["error"]["message"] == "HTTP method is not allowed for this route"
    assert wrong.json()["request_id"] == wrong.headers["x-request-id"]


def test_10_header_budget_overflow_is_431(serve: ServeFactory) -> None:
    server = serve("server.max_header_bytes=2048")
    response = get(server, "/health/live", headers={"x-padding": "p" * 3000})
    assert response.status_code == 431
    body = response.json()
    assert body["error"]["code"] == "invalid_request"
    assert body["error"]["param"] is None
    assert body["error"]["imagegen_bridge"]["retryable"] is False
    assert isinstance(body["request_id"], str) and body["request_id"]
    assert response.headers["x-request-id"] == body["request_id"]


def test_11_synchronous_generation_shape(standard: LiveServer) -> None:
    response = post(standard, "/v1/images", GENERATE)
    assert response.status_code == 200
    body = response.json()
    item = body["data"][0]
    assert (item["index"], item["type"], item["format"]) == (0, "b64_json", "png")
    assert (item["width"], item["height"]) == (1, 1)
    assert item["bytes"] == len(base64.b64decode(item["b64_json"]))
    assert re.fullmatch(r"[0-9a-f]{64}", item["sha256"])
    defaults = {
        "n": 1,
        "size": "auto",
        "quality": "auto",
        "output_format": "png",
        "background": "auto",
        "moderation": "auto",
        "partial_images": 0,
        "failure_policy": "fail_fast",
        "action": "auto",
    }
    assert body["requested"] == defaults
    assert body["effective"] == defaults
    assert sorted(body["timings"]) == [
        "artifact_ms",
        "input_ms",
        "provider_ms",
        "queue_ms",
        "total_ms",
    ]
    assert all(isinstance(value, int) for value in body["timings"].values())
    for absent in ("normalizations", "failures", "attempts", "warnings"):
        assert absent not in body
    assert response.headers["content-type"] == "application/json"


def test_12_blank_prompt_is_a_validation_issue(standard: LiveServer) -> None:
    response = post(standard, "/v1/images", {"operation": "generate", "prompt": ""})
    assert response.status_code == 422
    assert native(response)["code"] == "invalid_request"
    assert response.json()["error"]["message"] == "request validation failed"
    first = native(response)["details"]["issues"][0]
    assert (first["field"], first["code"]) == ("prompt", "required")
    assert first["message"]
    assert response.json()["error"]["param"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"operation": "generate"},
        {"prompt": "test"},
        {"operation": "generate", "prompt": "test", "surprise": True},
        {"operation": "generate", "prompt": "test", "images": []},
        "not json at all",
    ],
)
def test_13_body_decode_failures_have_no_details(standard: LiveServer, body: Any) -> None:
    with standard.client() as client:
        if isinstance(body, str):
            response = client.post("/v1/images", content=body)
        else:
            response = client.post("/v1/images", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["message"] == "request body must be valid ImageRequest JSON"
    assert "details" not in error["imagegen_bridge"]
    assert error["param"] is None


def test_14_size_spelling_and_ambiguity(standard: LiveServer) -> None:
    upper = post(standard, "/v1/images", {**GENERATE, "parameters": {"size": "1024X1024"}})
    assert upper.status_code == 422
    assert upper.json()["error"]["message"] == "request body must be valid ImageRequest JSON"
    ambiguous = post(
        standard,
        "/v1/images",
        {**GENERATE, "parameters": {"size": "1536x1024", "aspect_ratio": "3:2"}},
    )
    assert ambiguous.status_code == 422
    assert ("parameters.size", "ambiguous") in issues(ambiguous)


def test_15_issues_are_sorted_by_field(standard: LiveServer) -> None:
    response = post(
        standard,
        "/v1/images",
        {**GENERATE, "parameters": {"n": 0, "output_compression": 80}, "timeout_ms": 0},
    )
    assert response.status_code == 422
    fields = [field for field, _ in issues(response)]
    assert fields == ["parameters.n", "parameters.output_compression", "timeout_ms"]
    with_prompt = post(
        standard,
        "/v1/images",
        {
            "operation": "generate",
            "prompt": " ",
            "parameters": {"n": 0, "output_compression": 80},
            "timeout_ms": 0,
        },
    )
    fields = [field for field, _ in issues(with_prompt)]
    assert fields == ["parameters.n", "parameters.output_compression", "prompt", "timeout_ms"]


def test_16_partial_images_above_three(standard: LiveServer) -> None:
    response = post(standard, "/v1/images", {**GENERATE, "parameters": {"partial_images": 4}})
    assert response.status_code == 422
    assert ("parameters.partial_images", "out_of_range") in issues(response)


def test_17_session_mode_rules(standard: LiveServer) -> None:
    persistent = post(standard, "/v1/images", {**GENERATE, "session": {"mode": "persistent"}})
    assert ("session.key", "required") in issues(persistent)
    isolated = post(
        standard, "/v1/images", {**GENERATE, "session": {"mode": "isolated", "key": "x"}}
    )
    assert ("session", "incompatible") in issues(isolated)


def test_18_output_option_rules(standard: LiveServer) -> None:
    b64_named = post(
        standard,
        "/v1/images",
        {**GENERATE, "output": {"response_format": "b64_json", "filename": "a.png"}},
    )
    assert ("output", "incompatible") in issues(b64_named)
    wrong_ext = post(
        standard,
        "/v1/images",
        {**GENERATE, "output": {"response_format": "artifact", "filename": "a.jpg"}},
    )
    assert ("output.filename", "invalid") in issues(wrong_ext)
    suffix = post(
        standard,
        "/v1/images",
        {**GENERATE, "output": {"response_format": "artifact", "collision": "suffix"}},
    )
    assert ("output.collision", "incompatible") in issues(suffix)


def test_19_sidecar_metadata_needs_artifacts(standard: LiveServer) -> None:
    response = post(
        standard,
        "/v1/images",
        {**GENERATE, "output": {"response_format": "b64_json", "metadata": "sidecar"}},
    )
    assert response.status_code == 422
    assert ("output.metadata", "incompatible") in issues(response)


def test_20_strict_compatibility_rejects_unsupported_quality(standard: LiveServer) -> None:
    response = post(
        standard,
        "/v1/images",
        {**GENERATE, "parameters": {"quality": "high"}, "policies": {"compatibility": "strict"}},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unsupported_capability"
    assert error["param"] == "parameters.quality"
    assert len(error["imagegen_bridge"]["details"]["attempts"]) == 1


def test_21_normalize_reports_each_change(standard: LiveServer) -> None:
    parameters = {"n": 3, "quality": "high", "size": "1536x1024"}
    response = post(
        standard,
        "/v1/images",
        {**GENERATE, "parameters": parameters, "policies": {"compatibility": "normalize"}},
    )
    assert response.status_code == 200
    body = response.json()
    # the original's three, then (issue 32) the delivered 1x1 against the 1536x1024 asked for
    negotiated = body["normalizations"][:3]
    reasons = {item["field"]: item for item in negotiated}
    assert len(negotiated) == 3
    assert reasons["parameters.n"]["reason"] == "clamped_to_provider_range"
    assert (reasons["parameters.n"]["requested"], reasons["parameters.n"]["effective"]) == (3, 2)
    assert reasons["parameters.quality"]["reason"] == "normalized_to_provider_value"
    assert reasons["parameters.size"]["reason"] == "normalized_to_provider_size"
    delivered = body["normalizations"][3:]
    assert [(d["field"], d["requested"], d["reason"]) for d in delivered] == [
        ("parameters.size", "1536x1024", "provider_output_size_differed")
    ]
    assert (body["effective"]["n"], body["effective"]["quality"]) == (2, "auto")
    assert body["effective"]["size"] == "auto"
    assert {k: body["requested"][k] for k in parameters} == parameters
    assert len(body["data"]) == 2


def test_22_routing_model_must_match_even_in_best_effort(standard: LiveServer) -> None:
    response = post(
        standard,
        "/v1/images",
        {
            **GENERATE,
            "routing": {"model": "another-model"},
            "policies": {"compatibility": "best_effort"},
        },
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "routing.model"


def test_23_mask_on_a_codex_provider(standard: LiveServer) -> None:
    image = {"type": "base64", "data": png_b64()}
    response = post(
        standard,
        "/v1/images",
        {
            "operation": "edit",
            "prompt": "test",
            "images": [image],
            "mask": image,
            "routing": {"provider": "codex-fake"},
        },
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("unsupported_capability", "mask")
    assert error["imagegen_bridge"]["details"]["codex_code"] == "CODEX_RASTER_MASK_UNSUPPORTED"


def test_24_unknown_provider_is_a_missing_resource(standard: LiveServer) -> None:
    """Decided deviation (docs/api-decisions.md): 404, not the original's 500."""
    response = post(standard, "/v1/images", {**GENERATE, "routing": {"provider": "nope"}})
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "routing.provider"
    assert error["imagegen_bridge"]["details"]["provider"] == "nope"
    fallback = post(
        standard, "/v1/images", {**GENERATE, "routing": {"fallbacks": [{"provider": "gone"}]}}
    )
    assert fallback.status_code == 404
    assert fallback.json()["error"]["param"] == "routing.fallbacks[0].provider"
    for path in ("/v1/providers/nope/capabilities", "/v1/sessions/key?provider=nope"):
        assert get(standard, path).status_code == 404
    malformed = get(standard, "/v1/providers/NOPE/capabilities")
    assert malformed.status_code == 404
    assert "provider" not in malformed.json()["error"]["imagegen_bridge"]["details"]


def test_25_provider_pages_and_cursors(standard: LiveServer) -> None:
    for query in (
        "limit=0&cursor=%25",
        "limit=101",
        "foo=1",
        "limit=x",
        "cursor=bW9jaw==",
        "cursor=&cursor=",
    ):
        response = get(standard, f"/v1/providers?{query}")
        assert response.status_code == 422, query
        assert response.json()["error"]["code"] == "invalid_request"
    first = get(standard, "/v1/providers?limit=1").json()
    assert [item["name"] for item in first["items"]] == ["codex-fake"]
    # The original's SDK sends an unset cursor as an empty value: that is the first page.
    assert get(standard, "/v1/providers?limit=1&cursor=").json() == first
    cursor = base64.urlsafe_b64encode(b"codex-fake").rstrip(b"=").decode()
    assert first["next_cursor"] == cursor
    second = get(standard, f"/v1/providers?limit=1&cursor={cursor}").json()
    assert [item["name"] for item in second["items"]] == ["mock"]
    last = get(standard, f"/v1/providers?limit=5&cursor={second['next_cursor']}").json()
    assert [item["name"] for item in last["items"]] == ["ready"]
    assert "next_cursor" not in last


def test_26_descriptors_and_capability_documents(standard: LiveServer) -> None:
    items = get(standard, "/v1/providers").json()["items"]
    assert all(isinstance(item["models"], list) and item["models"] for item in items)
    required = {
        "provider", "implementation_version", "experimental", "generation", "edits", "count",
        "batching", "sizes", "aspect_ratio", "resolution", "qualities", "output_formats",
        "backgrounds", "transparent_background", "moderation", "negative_prompt",
        "revised_prompt", "user_attribution", "input_fidelities", "actions",
        "reference_images", "edit_images", "masks", "partial_images", "persistent_sessions",
        "explicit_threads",
    }  # fmt: skip
    for item in items:
        caps = get(standard, f"/v1/providers/{item['name']}/capabilities").json()
        assert required <= set(caps)
        assert caps["batching"]["mode"] in {"native", "fan_out"}
        assert get(standard, f"/v1/providers/{item['name']}/capabilities?model=").json() == caps
    unknown_query = get(standard, "/v1/providers/mock/capabilities?model=a&extra=1")
    assert unknown_query.status_code == 422


def test_27_idempotent_replay_and_conflict(standard: LiveServer) -> None:
    provider = standard.state.runtime.registry.resolve("ready")
    assert isinstance(provider, FakeProvider)
    before = provider.calls
    key = {"Idempotency-Key": f"replay-{uuid.uuid4()}"}
    first = post(standard, "/v1/images", GENERATE, headers=key)
    second = post(standard, "/v1/images", GENERATE, headers=key)
    assert first.status_code == second.status_code == 200
    one, two = first.json(), second.json()
    assert (one["id"], one["created"], one["data"]) == (two["id"], two["created"], two["data"])
    assert provider.calls == before + 1
    conflict = post(standard, "/v1/images", {**GENERATE, "prompt": "other"}, headers=key)
    assert conflict.status_code == 409
    assert native(conflict)["code"] == "idempotency_conflict"


def test_28_header_key_must_match_body_key(standard: LiveServer) -> None:
    response = post(
        standard,
        "/v1/images",
        {**GENERATE, "idempotency_key": "b"},
        headers={"Idempotency-Key": "a"},
    )
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "Idempotency-Key conflicts with the request body"
    for bad in ("x" * 513, "with space"):
        response = post(standard, "/v1/images", GENERATE, headers={"Idempotency-Key": bad})
        assert response.status_code == 422


def sse_events(text: str) -> list[tuple[str, str]]:
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        assert len(lines) == 2, block
        assert lines[0].startswith("event: ") and lines[1].startswith("data: ")
        events.append((lines[0][7:], lines[1][6:]))
    return events


def test_29_stream_lifecycle_with_partials(standard: LiveServer) -> None:
    body = {
        **GENERATE,
        "routing": {"provider": "mock"},
        "parameters": {**SMALL, "partial_images": 1},
    }
    response = post(standard, "/v1/images/stream", body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    events = sse_events(response.text)
    assert events[0] == ("started", '{"type":"started"}')
    names = [name for name, _ in events]
    partial = json.loads(events[names.index("partial_image")][1])
    assert (partial["type"], partial["index"], partial["partial_index"]) == ("partial_image", 0, 0)
    assert base64.b64decode(partial["b64_json"]).startswith(b"\x89PNG")
    assert names[-1] == "completed" and names.count("completed") == 1 and "error" not in names
    completed = json.loads(events[-1][1])
    assert completed["type"] == "completed"
    assert completed["response"]["provider"] == "mock"
    assert completed["response"]["id"] == response.headers["x-request-id"]


def test_30_stream_validation_error_arrives_in_the_stream(standard: LiveServer) -> None:
    response = post(standard, "/v1/images/stream", {"operation": "generate", "prompt": ""})
    assert response.status_code == 200
    events = sse_events(response.text)
    assert [name for name, _ in events] == ["started", "error"]
    envelope = json.loads(events[1][1])
    assert envelope["error"]["imagegen_bridge"]["code"] == "invalid_request"
    assert envelope["request_id"] == response.headers["x-request-id"]
    decode = post(standard, "/v1/images/stream", {"prompt": "no operation"})
    assert decode.status_code == 422
    assert decode.headers["content-type"] == "application/json"


def test_31_openai_compatible_generation(standard: LiveServer) -> None:
    response = post(
        standard,
        "/v1/images/generations",
        {
            "prompt": "test",
            "quality": "auto",
            "size": "8x8",
            "imagegen_bridge": {"provider": "mock"},
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert base64.b64decode(body["data"][0]["b64_json"]).startswith(b"\x89PNG")
    assert body["data"][0]["revised_prompt"] == "test (mock rendering)"
    extension = body["imagegen_bridge"]
    assert extension["provider"] == "mock"
    assert extension["normalizations"] == [] and extension["warnings"] == []
    assert isinstance(body["created"], int)
    assert extension["id"] == response.headers["x-request-id"]


def test_32_compat_rejects_unknown_fields_by_name(standard: LiveServer) -> None:
    # Issue 30 changed the original's anonymous refusal: the field is named (param).
    response = post(standard, "/v1/images/generations", {"prompt": "test", "tempo": "vivid"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["param"] == "tempo"
    assert error["message"] == "tempo is not a field of this request"


def edit(server: LiveServer, files: list[tuple[str, Any]], data: dict[str, str]) -> httpx.Response:
    with server.client() as client:
        return client.post("/v1/images/edits", files=files, data=data)


def test_33_multipart_edits(standard: LiveServer) -> None:
    image = ("image", ("source.png", png(), "image/png"))
    ok = edit(standard, [image], {"prompt": "test"})
    assert ok.status_code == 200, ok.text
    assert base64.b64decode(ok.json()["data"][0]["b64_json"]).startswith(b"\x89PNG")
    assert ok.json()["imagegen_bridge"]["provider"] == "ready"

    def message(files: list[tuple[str, Any]], data: dict[str, str]) -> tuple[int, str]:
        response = edit(standard, files, data)
        return response.status_code, response.json()["error"]["message"]

    assert message([("prompt", (None, b"test"))], {}) == (
        422,
        "multipart edit requires at least one image",
    )
    assert message([image, ("foo", ("f", b"x", "text/plain"))], {"prompt": "test"}) == (
        422,
        "multipart field is unsupported",
    )
    with standard.client() as client:
        twice = client.post(
            "/v1/images/edits",
            files=[image, ("prompt", (None, b"one")), ("prompt", (None, b"two"))],
        )
    assert twice.status_code == 422
    assert twice.json()["error"]["message"] == "multipart text field must not be repeated"
    assert message([image], {}) == (422, "multipart edit requires a prompt")
    assert message([image], {"prompt": "t", "size": "8X8"}) == (422, "multipart size is invalid")
    assert message([image], {"prompt": "t", "quality": "ultra"}) == (
        422,
        "multipart quality is invalid",
    )
    assert message([image], {"prompt": "t", "response_format": "artifact"}) == (
        422,
        "multipart response_format is invalid",
    )
    assert message(
        [image, ("mask", ("m.png", png(), "image/png")), ("mask", ("m.png", png(), "image/png"))],
        {"prompt": "t"},
    ) == (
        422,
        "multipart mask field must not be repeated",
    )
    assert message([image], {"prompt": "t" * (64 * 1024 + 1)}) == (
        422,
        "multipart text field exceeds the byte limit",
    )
    with standard.client() as client:
        not_multipart = client.post("/v1/images/edits", json={"prompt": "t"})
    assert not_multipart.json()["error"]["message"] == "request must be valid multipart/form-data"
    no_sessions = edit(standard, [image], {"prompt": "t", "session_key": "gallery"})
    assert no_sessions.status_code == 400
    assert no_sessions.json()["error"]["param"] == "session.mode"
    session = edit(
        standard,
        [image],
        {"prompt": "t", "session_key": "gallery", "provider": "mock", "size": "8x8"},
    )
    assert session.status_code == 200, session.text
    assert session.json()["imagegen_bridge"]["session"]["key"] == "gallery"


def test_43_diagnostics_are_redacted_and_protected(guarded: LiveServer) -> None:
    assert get(guarded, "/v1/diagnostics").status_code == 401
    get(guarded, "/v1/sessions/private-key?provider=mock", headers=AUTH)
    response = get(guarded, "/v1/diagnostics", headers=AUTH)
    assert response.status_code == 200
    body = response.json()
    assert body["bridge_version"]
    assert body["configuration"]["listener_scope"] == "loopback"
    assert body["configuration"]["authentication_required"] is True
    assert body["events"]["capacity"] == 256
    items = body["events"]["items"]
    sequences = [item["sequence"] for item in items]
    assert sequences == sorted(sequences, reverse=True)
    assert items[0]["route"] == "/v1/sessions/{key}" and items[0]["status"] == 404
    assert all(item["route"] != "/v1/diagnostics" or item["status"] == 401 for item in items)
    assert "private-key" not in response.text


def test_44_metrics_are_opt_in_protected_and_prompt_free(
    serve: ServeFactory, guarded: LiveServer
) -> None:
    disabled = serve()
    assert get(disabled, "/metrics").status_code == 404
    assert get(guarded, "/metrics").status_code == 401
    secret_prompt = "metrics-secret-prompt"
    ok = post(
        guarded,
        "/v1/images",
        {**GENERATE, "prompt": secret_prompt, "parameters": SMALL},
        headers=AUTH,
    )
    assert ok.status_code == 200
    assert (
        post(
            guarded, "/v1/images", {"operation": "generate", "prompt": ""}, headers=AUTH
        ).status_code
        == 422
    )
    response = get(guarded, "/metrics", headers=AUTH)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = response.text
    assert "imagegen_bridge_requests_total" in text
    assert 'result="success"' in text
    assert re.search(r'imagegen_bridge_requests_total\{[^}]*code="invalid_request"', text)
    assert re.search(r'imagegen_bridge_requests_total\{[^}]*result="error"', text)
    assert "imagegen_bridge_generated_bytes_total" in text
    assert 'imagegen_bridge_queue_depth{provider="none",scope="global"}' in text
    assert 'le="0.100"' in text
    assert secret_prompt not in text and TOKEN not in text


async def test_45_overload_answers_only_200_or_503_and_recovers(serve: ServeFactory) -> None:
    server = serve("runtime.global.max_concurrent=2", "runtime.global.max_queued=4")
    body = {**GENERATE, "prompt": "[mock:latency=300] slow", "parameters": SMALL}
    async with server.async_client(limits=httpx.Limits(max_connections=50)) as client:
        responses = await asyncio.gather(*(client.post("/v1/images", json=body) for _ in range(40)))
        statuses = [response.status_code for response in responses]
        assert set(statuses) <= {200, 503}
        assert statuses.count(200) >= 2 and statuses.count(503) >= 1
        for response in responses:
            if response.status_code == 503:
                error = response.json()["error"]
                assert error["code"] == "overloaded"
                assert error["imagegen_bridge"]["retryable"] is True
                assert response.headers["retry-after"] == "1"
        recovered = await client.post("/v1/images", json={**GENERATE, "parameters": SMALL})
        assert recovered.status_code == 200


def test_46_openapi_is_public(guarded: LiveServer) -> None:
    response = get(guarded, "/v1/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["title"] == "Imagegen Bridge API"


def test_48_session_lookup(standard: LiveServer) -> None:
    unknown = get(standard, "/v1/sessions/unknown?provider=mock")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "session_not_found"
    unsupported = get(standard, "/v1/sessions/unknown")
    assert unsupported.status_code == 400
    assert unsupported.json()["error"]["code"] == "unsupported_capability"
    empty = get(standard, "/v1/sessions/unknown?provider=")  # the SDK's "no provider"
    assert empty.status_code == 400
    assert empty.json()["error"]["code"] == "unsupported_capability"
    assert get(standard, "/v1/sessions/unknown?provider=mock&x=1").status_code == 422


def test_48_session_bindings_can_be_deleted(standard: LiveServer) -> None:
    """DELETE answers 204 and the binding is gone; an unknown key is 404."""
    key = f"delete-me-{uuid.uuid4().hex[:8]}"
    created = post(
        standard,
        "/v1/images",
        {
            **GENERATE,
            "routing": {"provider": "mock"},
            "parameters": SMALL,
            "session": {"mode": "persistent", "key": key},
        },
    )
    assert created.status_code == 200, created.text
    path = f"/v1/sessions/{key}?provider=mock"
    found = get(standard, path)
    assert found.status_code == 200
    assert found.json()["key"] == key and found.json()["thread_id"]
    with standard.client() as client:
        deleted = client.delete(path)
        assert deleted.status_code == 204 and deleted.content == b""
        assert client.get(path).json()["error"]["code"] == "session_not_found"
        again = client.delete(path)
        assert again.status_code == 404
        assert again.json()["error"]["code"] == "session_not_found"
        assert client.delete(f"/v1/sessions/{key}").status_code == 400


def test_30_stream_idempotency_header_problems_answer_422_before_the_stream(
    standard: LiveServer,
) -> None:
    """Decided deviation (docs/api-decisions.md, "Other deviations"): known before any work, so a
    plain 422 JSON envelope instead of an in-stream error."""
    cases = [
        ({**GENERATE, "idempotency_key": "b"}, "a"),
        (GENERATE, "with space"),
        (GENERATE, "x" * 513),
    ]
    for body, key in cases:
        response = post(standard, "/v1/images/stream", body, headers={"Idempotency-Key": key})
        assert response.status_code == 422, key
        assert response.headers["content-type"] == "application/json"
        assert response.json()["error"]["code"] == "invalid_request"
    ok = post(standard, "/v1/images/stream", GENERATE, headers={"Idempotency-Key": "fine-key"})
    assert ok.status_code == 200
    assert [name for name, _ in sse_events(ok.text)][-1] == "completed"
