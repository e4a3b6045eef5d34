"""Input images over the HTTP API: the offline mock follows every provider's input rules."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.artifacts.images import png
from tests.server.conftest import LiveServer, ServeFactory
from tests.support.network_guard import no_external_network  # noqa: F401 - fixture

SOURCE = png(8, 8, (10, 200, 10, 255))


@pytest.fixture
def server(serve: ServeFactory) -> LiveServer:
    live = serve(
        'inputs.local_roots=["{data}/inputs"]',
        "inputs.remote.enabled=true",
        "artifacts.root={data}/artifacts",
    )
    (live.data_dir / "inputs").mkdir()
    (live.data_dir / "inputs" / "source.png").write_bytes(SOURCE)
    (live.data_dir / "outside.png").write_bytes(SOURCE)
    return live


def edit(server: LiveServer, item: dict[str, Any]) -> httpx.Response:
    body = {
        "operation": "edit",
        "prompt": "warmer",
        "images": [item],
        "parameters": {"size": "8x8"},
        "routing": {"provider": "mock"},
    }
    with server.client() as client:
        return client.post("/v1/images", json=body)


def input_error(response: httpx.Response) -> dict[str, Any]:
    """The ``error`` object: ``message`` and the bridge's ``imagegen_bridge`` part."""
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["imagegen_bridge"]["code"] == "input"
    assert error["imagegen_bridge"]["details"]["field"] == "images[0]"
    return error


def test_a_file_input_under_the_roots_is_edited(server: LiveServer) -> None:
    response = edit(server, {"type": "file", "path": "source.png", "media_type": "image/png"})
    assert response.status_code == 200, response.text
    assert response.json()["provider"] == "mock"
    assert response.json()["timings"]["input_ms"] >= 0


def test_a_file_outside_the_roots_is_refused(server: LiveServer) -> None:
    error = input_error(edit(server, {"type": "file", "path": "../outside.png"}))
    assert "outside.png" not in error["message"]


def test_a_png_declared_as_jpeg_is_refused(server: LiveServer) -> None:
    item = {
        "type": "base64",
        "data": base64.b64encode(SOURCE).decode(),
        "media_type": "image/jpeg",
    }
    error = input_error(edit(server, item))
    assert error["imagegen_bridge"]["details"]["detected_media_type"] == "image/png"


@pytest.mark.usefixtures("no_external_network")
@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/a.png", "http://[::1]/"]
)
def test_private_and_link_local_urls_are_refused(server: LiveServer, url: str) -> None:
    error = input_error(edit(server, {"type": "url", "url": url}))
    assert error["message"] == "remote image hostname resolves to a private or reserved address"
