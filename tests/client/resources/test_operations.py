"""``client.health``, ``client.artifacts`` and ``client.diagnostics()`` against a real bridge."""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Iterator

import httpx
import pytest
from PIL import Image

from imagebridge.client import (
    ArtifactFile,
    AsyncImageBridgeClient,
    BridgeAPIError,
    ErrorCode,
    ImageBridgeClient,
)
from tests.client.conftest import Client, close, make_client, resolve
from tests.server.conftest import LiveServer, start_server

TOKEN = "sdk-test-token"


async def test_health(api: Client) -> None:
    assert await resolve(api.health.live()) is True
    assert await resolve(api.health.ready()) is True


async def test_readiness_not_ready_is_false(kind: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"status": "not_ready"})

    transport = httpx.MockTransport(handler)
    client: Client
    if kind == "async":
        client = AsyncImageBridgeClient(
            "http://127.0.0.1:9", env={}, http_client=httpx.AsyncClient(transport=transport)
        )
    else:
        client = ImageBridgeClient(
            "http://127.0.0.1:9", env={}, http_client=httpx.Client(transport=transport)
        )
    assert await resolve(client.health.ready()) is False


async def test_artifacts_and_thumbnails_are_verified(api: Client) -> None:
    job = await resolve(api.jobs.create({"prompt": "ARTIFACT", "parameters": {"size": "80x40"}}))
    final = await resolve(api.jobs.wait(job.id, timeout=20, poll_interval=0.02))
    item = final.result.data[0]
    artifact = await resolve(api.artifacts.get(item.id))
    assert isinstance(artifact, ArtifactFile)
    assert artifact.media_type == "image/png"
    assert artifact.sha256 == item.sha256 == hashlib.sha256(artifact.data).hexdigest()
    assert artifact.filename == item.name
    thumbnail = await resolve(api.artifacts.thumbnail(item.id, edge=32))
    image = Image.open(io.BytesIO(thumbnail.data))
    assert image.format == "PNG"
    assert max(image.size) == 32
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.artifacts.get(str(uuid.UUID(int=3))))
    assert caught.value.status_code == 404
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.artifacts.thumbnail(item.id, edge=16))
    assert caught.value.status_code == 422
    assert await resolve(api.artifacts.delete(item.id)) is None
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.artifacts.get(item.id))
    assert caught.value.status_code == 404
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.artifacts.delete(item.id))
    assert caught.value.status_code == 404


async def test_tampered_artifact_bytes_are_refused(kind: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            content=b"\x89PNG\r\n\x1a\nnot really",
            headers={"content-type": "image/png", "etag": '"' + "0" * 64 + '"'},
        )

    transport = httpx.MockTransport(handler)
    client: Client
    if kind == "async":
        client = AsyncImageBridgeClient(
            "http://127.0.0.1:9", env={}, http_client=httpx.AsyncClient(transport=transport)
        )
    else:
        client = ImageBridgeClient(
            "http://127.0.0.1:9", env={}, http_client=httpx.Client(transport=transport)
        )
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(client.artifacts.get("anything"))
    assert caught.value.code is ErrorCode.PROTOCOL


async def test_diagnostics_is_a_redacted_json_object(api: Client) -> None:
    diagnostics = await resolve(api.diagnostics())
    assert diagnostics["bridge_version"]
    assert diagnostics["events"]["capacity"] == 256
    assert "circuit_breakers" not in diagnostics["runtime"]  # the original's document
    extended = await resolve(api.diagnostics(extended=True))
    assert extended["runtime"]["circuit_breakers"]["mock"]["state"] == "closed"
    assert extended["runtime"]["global_queued"] == diagnostics["runtime"]["global_queued"]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(
        tmp_path_factory.mktemp("guarded"),
        ['server.bearer_token_env="SDK_TEST_BEARER"'],
        env={"SDK_TEST_BEARER": TOKEN},
    )
    yield live
    live.stop()


async def test_bearer_token_from_argument_or_environment(kind: str, guarded: LiveServer) -> None:
    anonymous = make_client(kind, guarded.url)
    try:
        with pytest.raises(BridgeAPIError) as caught:
            await resolve(anonymous.providers.list())
        assert caught.value.status_code == 401
        assert caught.value.code is ErrorCode.AUTHENTICATION
        assert await resolve(anonymous.health.live()) is True  # public route
    finally:
        await close(anonymous)
    for client in (
        make_client(kind, guarded.url, token=TOKEN),
        make_client(kind, guarded.url, env={"IMAGEGEN_BRIDGE_TOKEN": TOKEN}),
        make_client(kind, None, env={"IMAGEGEN_BRIDGE_TOKEN": TOKEN,
                                     "IMAGEGEN_BRIDGE_URL": guarded.url}),
    ):  # fmt: skip
        try:
            page = await resolve(client.providers.list())
            assert page.items[0].name == "mock"
        finally:
            await close(client)
