"""``response_format: "url"``: a signed link any HTTP client can fetch, and nothing more."""

from __future__ import annotations

import base64
import hashlib
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import openai
import pytest

from imagebridge.artifacts.filesystem.store import AsyncArtifactStore
from tests.server.conftest import LiveServer, ServeFactory

TOKEN = "link-test-token"
LINK = "/v1/artifact-links/"


@pytest.fixture(scope="module")
def bridge(serve_module: ServeFactory) -> LiveServer:
    return serve_module('server.bearer_token_env="BRIDGE_TOKEN"', env={"BRIDGE_TOKEN": TOKEN})


def authorized(server: LiveServer) -> httpx.Client:
    return server.client(headers={"Authorization": f"Bearer {TOKEN}"})


def native_url(server: LiveServer, prompt: str) -> tuple[str, str]:
    """A native ``url`` output: its link and the sha256 the response reports."""
    body = {
        "operation": "generate",
        "prompt": prompt,
        "parameters": {"size": "16x16"},
        "output": {"response_format": "url"},
    }
    with authorized(server) as client:
        response = client.post("/v1/images", json=body)
    assert response.status_code == 200, response.text
    item = response.json()["data"][0]
    assert item["type"] == "url" and set(item) >= {"sha256", "width", "height", "format"}
    return item["url"], item["sha256"]


def refusal(response: httpx.Response) -> tuple[int, str, str | None]:
    error = response.json()["error"]["imagegen_bridge"]
    return response.status_code, error["code"], (error.get("details") or {}).get("reason")


def test_a_native_url_is_fetched_without_a_bearer(bridge: LiveServer) -> None:
    url, sha256 = native_url(bridge, "linked fox")
    assert url.startswith(bridge.url + LINK)
    fetched = httpx.get(url, timeout=30)  # a plain client: no bearer, no base URL
    assert fetched.status_code == 200
    assert hashlib.sha256(fetched.content).hexdigest() == sha256
    assert fetched.headers["content-type"] == "image/png"
    assert fetched.headers["cache-control"].startswith("private, max-age=")
    assert int(fetched.headers["cache-control"].rsplit("=", 1)[1]) <= 3600
    assert httpx.get(url.split("?")[0], timeout=30).status_code == 403  # the link is the key


def test_the_openai_sdk_url_fetches_the_same_bytes_as_b64(bridge: LiveServer) -> None:
    client = openai.OpenAI(base_url=f"{bridge.url}/v1", api_key=TOKEN)
    linked = client.images.generate(
        model="mock-image-1", prompt="sdk fox", size="16x16", response_format="url"
    )
    inline = client.images.generate(
        model="mock-image-1", prompt="sdk fox", size="16x16", response_format="b64_json"
    )
    assert linked.data is not None and inline.data is not None
    url = linked.data[0].url
    assert url is not None and linked.data[0].b64_json is None
    expires = int(parse_qs(urlsplit(url).query)["expires"][0])
    assert 0 < expires - time.time() <= 3600
    fetched = httpx.get(url, timeout=30)
    assert fetched.status_code == 200
    assert fetched.content == base64.b64decode(inline.data[0].b64_json or "")


def test_tampered_links_are_refused_before_any_file_is_read(bridge: LiveServer) -> None:
    url, _ = native_url(bridge, "tampered fox")
    other, _ = native_url(bridge, "another fox")
    path, query = url.split("?")
    fields = parse_qs(query)
    signature, expires = fields["signature"][0], fields["expires"][0]
    flipped = ("B" if signature[0] == "A" else "A") + signature[1:]
    other_path = other.split("?")[0]
    tampered = [
        f"{path}?expires={expires}&signature={flipped}",
        f"{path}?expires={int(expires) + 3600}&signature={signature}",
        f"{other_path}?{query}",  # another artifact under this link's signature
        f"{path.rsplit('/', 1)[0]}/renamed.png?{query}",
        f"{url}&expires={expires}",
        f"{url}&extra=1",
        f"{path}?signature={signature}",
    ]
    for candidate in tampered:
        response = httpx.get(candidate, timeout=30)
        assert refusal(response) == (403, "permission_denied", "invalid_link"), candidate
    assert httpx.get(url, timeout=30).status_code == 200  # the genuine link still works


def test_expired_links_are_refused(bridge: LiveServer) -> None:
    url, _ = native_url(bridge, "expiring fox")
    path = urlsplit(url).path
    _, _, artifact_id, basename = path.strip("/").split("/")
    # A link this bridge signed, one second in the past (its own signer, its own key).
    expired = bridge.state.application.links.sign(artifact_id, basename, int(time.time()) - 1)
    response = httpx.get(f"{bridge.url}/{expired}", timeout=30)
    assert refusal(response) == (403, "permission_denied", "expired_link")
    assert response.json()["error"]["message"] == "artifact link has expired"


def compat_url(server: LiveServer, prompt: str) -> str:
    body = {"prompt": prompt, "size": "16x16", "response_format": "url"}
    with server.client() as client:
        response = client.post("/v1/images/generations", json=body)
    assert response.status_code == 200, response.text
    url: str = response.json()["data"][0]["url"]
    return url


def test_a_deleted_artifacts_link_is_gone(serve: ServeFactory) -> None:
    server = serve()
    url = compat_url(server, "deleted fox")
    assert httpx.get(url, timeout=30).status_code == 200
    store = server.state.application.artifacts
    assert isinstance(store, AsyncArtifactStore)
    report = store.sync.cleanup(now=time.time() + 60, max_age_secs=0)
    assert report.deleted >= 1
    response = httpx.get(url, timeout=30)
    assert refusal(response)[:2] == (404, "artifact")


def test_a_public_base_url_prefixes_links_that_resolve_on_the_bridge(
    serve: ServeFactory,
) -> None:
    base = "https://images.example/bridge/"
    server = serve(f'artifacts.public_base_url="{base}"', "artifacts.url_ttl_secs=120")
    url = compat_url(server, "proxied fox")
    assert url.startswith(base + LINK.lstrip("/"))
    expires = int(parse_qs(urlsplit(url).query)["expires"][0])
    assert 0 < expires - time.time() <= 120
    # What a reverse proxy at the base address does: strip its prefix, forward the rest.
    forwarded = httpx.get(server.url + "/" + url.removeprefix(base), timeout=30)
    assert forwarded.status_code == 200
    assert forwarded.content.startswith(b"\x89PNG")
