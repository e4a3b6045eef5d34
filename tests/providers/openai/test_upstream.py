"""The OpenAI provider's HTTP side: proxies, no ambient credentials, compressed answers, bodies."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from imagebridge.contract.errors import ErrorCode
from imagebridge.providers.openai import upstream
from imagebridge.providers.openai.images import OpenAIImagesProvider, OpenAIImagesSettings
from tests.providers.openai.test_images import ENV, failure, request, run
from tests.support.network_guard import no_external_network  # noqa: F401 - fixture
from tests.support.openai_server import (
    Behaviour,
    OpenAIImagesServer,
    openai_server_fixture,  # noqa: F401 - registers `openai_server`
    openai_server_session_fixture,  # noqa: F401 - registers `openai_server_session`
)

REMOTE = "http://images.example.test/v1"
"""An upstream that is not loopback (never resolved: the calls go through the test proxy)."""


@pytest.fixture
def proxied(
    openai_server: OpenAIImagesServer, monkeypatch: pytest.MonkeyPatch
) -> OpenAIImagesServer:
    """The mock server doubles as an HTTP proxy: ``HTTP_PROXY`` points at it."""
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", openai_server.base_url.removesuffix("/v1"))
    return openai_server


@pytest.mark.usefixtures("no_external_network")
async def test_a_remote_upstream_is_reached_through_the_environment_proxy(
    proxied: OpenAIImagesServer,
) -> None:
    provider = OpenAIImagesProvider(OpenAIImagesSettings(base_url=REMOTE), environ=ENV)
    response = await run(provider, request())
    assert len(response.data) == 1
    assert [r.path for r in proxied.requests] == ["/v1/images/generations"]
    assert proxied.requests[0].headers["host"] == "images.example.test"


def test_no_proxy_exempts_a_host_from_the_environment_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "images.example.test")
    assert upstream.proxy_for("https://api.openai.com/v1/images") == "http://proxy.internal:3128"
    assert upstream.proxy_for("https://images.example.test/v1/images") is None
    assert upstream.proxy_for("http://api.openai.com/v1/images") is None  # no HTTP_PROXY


@pytest.mark.usefixtures("no_external_network")
async def test_a_loopback_upstream_ignores_the_proxy_variables(
    openai_server: OpenAIImagesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    provider = OpenAIImagesProvider(
        OpenAIImagesSettings(base_url=openai_server.base_url), environ=ENV
    )
    assert len((await run(provider, request())).data) == 1


@pytest.mark.usefixtures("no_external_network")
async def test_netrc_credentials_are_never_sent(
    proxied: OpenAIImagesServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine images.example.test login someone password hunter2\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    provider = OpenAIImagesProvider(
        OpenAIImagesSettings(base_url=REMOTE, api_key_env=None), environ={}
    )
    await run(provider, request())
    assert "authorization" not in proxied.requests[0].headers


async def test_a_compressed_answer_is_refused_as_an_unknown_outcome(
    openai_server: OpenAIImagesServer,
) -> None:
    answer = json.dumps({"created": 1, "data": [{"b64_json": ""}]}).encode()
    openai_server.script(
        Behaviour(raw_body=gzip.compress(answer), headers={"content-encoding": "gzip"})
    )
    provider = OpenAIImagesProvider(
        OpenAIImagesSettings(base_url=openai_server.base_url), environ=ENV
    )
    error = await failure(provider, request())
    assert error.code is ErrorCode.PROTOCOL and "compressed" in error.message
    assert error.details["content_encoding"] == "gzip"
    assert error.outcome_unknown and openai_server.calls() == 1


async def test_generation_sends_json_and_asks_for_an_uncompressed_answer(
    openai_server: OpenAIImagesServer,
) -> None:
    provider = OpenAIImagesProvider(
        OpenAIImagesSettings(base_url=openai_server.base_url), environ=ENV
    )
    await run(provider, request(prompt="un renard roux"))
    sent = openai_server.requests[0]
    assert sent.headers["content-type"] == "application/json"
    assert sent.json is not None and sent.json["prompt"] == "un renard roux"
    assert sent.headers["accept-encoding"] == "identity"


# -- reading an answer's body ----------------------------------------------------------------


async def _pieces(body: bytes, size: int = 1000) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.mark.parametrize("declared", [True, False])
@pytest.mark.parametrize("preallocate_max", [1 << 20, 100])
async def test_a_body_is_read_whole_and_bounded_by_the_limit(
    monkeypatch: pytest.MonkeyPatch, declared: bool, preallocate_max: int
) -> None:
    monkeypatch.setattr(upstream, "PREALLOCATE_MAX_BYTES", preallocate_max)
    body = bytes(range(256)) * 40
    size = len(body) if declared else None
    assert await upstream.read_body(_pieces(body), size, len(body)) == body
    assert await upstream.read_body(_pieces(body), size, len(body) - 1) is None


async def test_a_body_longer_than_declared_is_refused() -> None:
    body = bytes(100)
    assert await upstream.read_body(_pieces(body, 30), 90, 1000) is None


async def test_an_error_body_is_read_only_up_to_its_limit() -> None:
    assert await upstream.read_prefix(_pieces(bytes(range(200)), 64), 100) == bytes(range(100))
