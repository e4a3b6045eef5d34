"""Where the client finds its bridge and token, and what it refuses to do with them."""

from __future__ import annotations

import httpx
import pytest

from imagebridge.client import (
    AsyncImageBridgeClient,
    BridgeAPIError,
    ErrorCode,
    ImageBridgeClient,
)
from imagebridge.client._config import normalize_base_url


def test_defaults_without_environment() -> None:
    client = ImageBridgeClient(env={})
    assert client.base_url == "http://127.0.0.1:8787"
    assert client.settings.token is None
    assert client.settings.timeout.read == 600.0
    assert client.settings.retry.max_retries == 2


def test_environment_is_read_and_arguments_win() -> None:
    env = {"IMAGEGEN_BRIDGE_URL": "http://localhost:9000/bridge/", "IMAGEGEN_BRIDGE_TOKEN": "t0k"}
    client = ImageBridgeClient(env=env)
    assert client.base_url == "http://localhost:9000/bridge"
    assert client.settings.token == "t0k"
    explicit = AsyncImageBridgeClient("https://bridge.example", token="other", env=env)
    assert explicit.base_url == "https://bridge.example"
    assert explicit.settings.token == "other"


def test_the_token_is_not_in_the_repr() -> None:
    client = ImageBridgeClient(token="very-secret-token", env={})
    assert "very-secret-token" not in repr(client)
    assert "very-secret-token" not in repr(client.settings)


@pytest.mark.parametrize(
    "url",
    ["ftp://host", "http://", "http://user:pw@host", "http://host/?q=1", "http://host/#f",
     "http://host:99999", "not a url"],
)  # fmt: skip
def test_malformed_base_urls(url: str) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        ImageBridgeClient(url, env={})
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.field == "base_url"


def test_a_token_is_never_sent_in_clear_text_off_this_machine() -> None:
    with pytest.raises(BridgeAPIError) as caught:
        ImageBridgeClient("http://bridge.example", token="t", env={})
    assert "plain http" in caught.value.message
    for url in ("http://127.0.0.1:1", "http://localhost:1", "http://[::1]:1", "https://b.example"):
        assert normalize_base_url(url, sends_token=True)
    allowed = ImageBridgeClient("http://bridge.lan", token="t", allow_insecure_token=True, env={})
    assert allowed.base_url == "http://bridge.lan"


@pytest.mark.parametrize("token", ["   ", "with space", "line\nbreak", "x" * 5000])
def test_malformed_tokens_are_refused_without_echo(token: str) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        ImageBridgeClient(token=token, env={})
    assert caught.value.field == "token"
    assert token.strip() == "" or token not in caught.value.message


def test_timeouts_and_limits() -> None:
    client = ImageBridgeClient(timeout=42, max_response_bytes=10, max_stream_bytes=20, env={})
    assert client.settings.timeout == httpx.Timeout(42.0, connect=10.0)
    assert (client.settings.max_response_bytes, client.settings.max_stream_bytes) == (10, 20)
    custom = httpx.Timeout(None)
    assert ImageBridgeClient(timeout=custom, env={}).settings.timeout is custom
    for bad in ({"timeout": 0}, {"timeout": float("inf")}, {"max_response_bytes": 0},
                {"max_retries": 1, "retry": ImageBridgeClient(env={}).settings.retry}):  # fmt: skip
        with pytest.raises(BridgeAPIError):
            ImageBridgeClient(env={}, **bad)  # type: ignore[arg-type]


def test_a_request_id_is_checked_before_sending() -> None:
    client = ImageBridgeClient("http://127.0.0.1:9", env={})
    with pytest.raises(BridgeAPIError) as caught:
        client.providers.list(request_id="has space")
    assert caught.value.field == "request_id"
