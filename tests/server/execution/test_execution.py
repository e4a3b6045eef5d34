"""Image operations as a caller sees them: error statuses, retry hints, idempotency, metrics."""

from __future__ import annotations

import base64
import re
import uuid

import pytest

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_of
from tests.support.images import noise_png


@pytest.fixture(scope="module")
def server(serve_module: ServeFactory) -> LiveServer:
    return serve_module("server.metrics.enabled=true")


def generate(prompt: str) -> dict[str, object]:
    return {"operation": "generate", "prompt": prompt, "parameters": {"size": "8x8"}}


def test_rate_limits_carry_retry_after_from_the_provider(server: LiveServer) -> None:
    with server.client() as client:
        response = client.post("/v1/images", json=generate("[mock:fail=rate_limited] x"))
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"  # mock: retry_after_ms 2000
    assert response.json()["error"]["code"] == "rate_limited"


def test_safety_rejections_are_moderation_blocked(server: LiveServer) -> None:
    with server.client() as client:
        response = client.post("/v1/images", json=generate("[mock:fail=safety_rejected] x"))
    assert response.status_code == 422
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("image_generation_user_error", "moderation_blocked")
    assert error["imagegen_bridge"]["details"]["retry_same_request"] is False


def test_compat_routes_replay_by_idempotency_key(server: LiveServer) -> None:
    mock = mock_of(server)
    key = {"Idempotency-Key": f"compat-{uuid.uuid4()}"}
    body = {"prompt": "replayed fox", "size": "8x8"}
    with server.client() as client:
        before = mock.calls
        first = client.post("/v1/images/generations", json=body, headers=key)
        second = client.post("/v1/images/generations", json=body, headers=key)
        other = client.post("/v1/images/generations", json={**body, "prompt": "other"}, headers=key)
    assert first.json() == second.json()
    assert mock.calls == before + 1
    assert other.status_code == 409


def test_url_delivery_that_cannot_be_signed_fails_before_provider_work(
    serve: ServeFactory,
) -> None:
    server = serve('artifacts.url_signing_key_env="UNSET_LINK_KEY_FOR_TEST"')
    mock = mock_of(server)
    body = {**generate("needs a url"), "output": {"response_format": "url"}}
    with server.client() as client:
        refused = client.post("/v1/images", json=body)
        inline = client.post("/v1/images", json=generate("inline still works"))
    assert refused.status_code == 500
    error = refused.json()["error"]["imagegen_bridge"]
    assert error["code"] == "configuration"
    assert error["details"]["field"] == "artifacts.url_signing_key_env"
    assert mock.calls == 1 and inline.status_code == 200


def test_name_collisions_are_conflicts(server: LiveServer) -> None:
    name = f"fixed-{uuid.uuid4().hex[:8]}.png"
    output = {"response_format": "artifact", "filename": name}
    body = {**generate("named"), "output": output}
    with server.client() as client:
        assert client.post("/v1/images", json=body).status_code == 200
        again = client.post("/v1/images", json=body)
        suffix = {**body, "output": {**output, "collision": "suffix"}}
        suffixed = client.post("/v1/images", json=suffix)
    assert again.status_code == 409
    assert again.json()["error"]["imagegen_bridge"]["code"] == "artifact"
    assert suffixed.status_code == 200
    assert suffixed.json()["data"][0]["name"] == name.replace(".png", "-2.png")


def test_metrics_label_unresolved_providers(server: LiveServer) -> None:
    with server.client() as client:
        client.post("/v1/images", json={**generate("x"), "routing": {"provider": "absent"}})
        text = client.get("/metrics").text
    assert re.search(r'requests_total\{code="invalid_request",provider="unresolved"', text)


def test_large_inline_inputs_are_decoded_and_used(server: LiveServer) -> None:
    encoded = base64.b64encode(noise_png(800, 800)).decode()
    assert len(encoded) > 1024 * 1024  # takes the worker-thread decoding path
    body = {
        "operation": "edit",
        "prompt": "use the noise",
        "images": [{"type": "base64", "data": encoded, "filename": "noise.png"}],
        "parameters": {"size": "8x8"},
    }
    with server.client() as client:
        response = client.post("/v1/images", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["data"][0]["width"] == 8
