"""The mock provider takes every input kind, under the rules every provider's inputs follow.

Each case runs through the configured application (the engine loads the inputs with the
loader built from ``[inputs]``), so the mock sees exactly what a real provider would.
"""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from imagebridge.application import Application, build_application
from imagebridge.config import load_config
from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.enums import SupportLevel
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.providers.mock import MockProvider
from tests.artifacts.http_server import Route, local_server
from tests.artifacts.images import jpeg, png
from tests.support.network_guard import no_external_network  # noqa: F401 - fixture

SOURCE = png(12, 12, (200, 40, 40, 255))
MOCK_ONLY = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
]
SSRF_URLS = [
    "http://127.0.0.1/image.png",
    "http://[::1]/image.png",
    "http://10.0.0.1/image.png",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:169.254.169.254]/image.png",
    "http://0.0.0.0/image.png",
]


def build(tmp_path: Path, *sets: str) -> Application:
    roots = tmp_path / "inputs"
    roots.mkdir(exist_ok=True)
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path / "data")}
    loaded = load_config(
        env=env, sets=[*MOCK_ONLY, f'inputs.local_roots=["{roots}"]', *sets], cwd=tmp_path
    )
    return build_application(loaded.config)


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[Application]:
    application = build(tmp_path)
    try:
        yield application
    finally:
        await application.aclose()


def mock_of(application: Application) -> MockProvider:
    provider = application.providers[0]
    inner = provider.inner if isinstance(provider, FanoutProvider) else provider
    assert isinstance(inner, MockProvider)
    return inner


def edit_with(item: dict[str, Any], **fields: Any) -> ImageRequest:
    body: dict[str, Any] = {
        "operation": "edit",
        "prompt": "make it warmer",
        "images": [item],
        "parameters": {"size": "12x12"},
    }
    body.update(fields)
    return ImageRequest.model_validate(body)


async def refused(application: Application, item: dict[str, Any]) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        await application.runtime.execute(edit_with(item))
    assert caught.value.code is ErrorCode.INPUT
    assert caught.value.details["field"] == "images[0]"
    assert mock_of(application).calls == 0  # refused before the provider ran
    return caught.value


# -- every kind is accepted ------------------------------------------------------------------


@pytest.mark.usefixtures("no_external_network")
async def test_file_url_base64_and_data_url_inputs_give_the_same_edit(tmp_path: Path) -> None:
    (tmp_path / "inputs" / "source.png").parent.mkdir(exist_ok=True)
    (tmp_path / "inputs" / "source.png").write_bytes(SOURCE)
    encoded = base64.b64encode(SOURCE).decode()
    async with local_server() as server:
        server.routes["/source.png"] = Route(headers={"Content-Type": "image/png"}, body=SOURCE)
        application = build(
            tmp_path,
            "inputs.remote.enabled=true",
            "inputs.remote.allow_private_networks=true",
            f"inputs.remote.allowed_ports=[{server.port}]",
        )
        try:
            kinds = [
                {"type": "file", "path": "source.png"},
                {"type": "file", "path": str(tmp_path / "inputs" / "source.png")},
                {"type": "url", "url": f"{server.origin}/source.png"},
                {"type": "base64", "data": encoded, "media_type": "image/png"},
                {"type": "data_url", "data_url": f"data:image/png;base64,{encoded}"},
            ]
            digests = {
                (await application.runtime.execute(edit_with(item))).data[0].sha256
                for item in kinds
            }
            plain = await application.runtime.execute(
                ImageRequest.model_validate(
                    {
                        "operation": "generate",
                        "prompt": "make it warmer",
                        "parameters": {"size": "12x12"},
                    }
                )
            )
        finally:
            await application.aclose()
    assert len(digests) == 1  # the same source, whatever carried it
    assert plain.data[0].sha256 not in digests  # and the edit did derive from it
    assert [seen.path for seen in server.seen] == ["/source.png"]


async def test_the_capability_document_states_the_bounds_it_holds_inputs_to(
    app: Application, monkeypatch: pytest.MonkeyPatch
) -> None:
    caps = await app.providers[0].capabilities(None)
    for inputs in (caps.edit_images, caps.reference_images, caps.masks):
        assert inputs.support is SupportLevel.NATIVE and inputs.available
    assert caps.edit_images.max_bytes_each == caps.reference_images.max_bytes_each

    monkeypatch.setattr("imagebridge.providers.mock.MAX_SOURCE_BYTES", len(SOURCE) - 1)
    item = {"type": "base64", "data": base64.b64encode(SOURCE).decode()}
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(edit_with(item))
    assert caught.value.code is ErrorCode.INPUT and caught.value.provider == "mock"
    assert caught.value.details["field"] == "images[0]"
    assert caught.value.details["maximum_bytes"] == len(SOURCE) - 1


# -- the local-root rules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["../outside.png", "sub/../../outside.png", "{tmp}/outside.png", "escape.png", "missing.png"],
)
async def test_local_files_outside_the_roots_are_refused(
    app: Application, tmp_path: Path, path: str
) -> None:
    (tmp_path / "outside.png").write_bytes(SOURCE)
    os.symlink(tmp_path / "outside.png", tmp_path / "inputs" / "escape.png")

    error = await refused(app, {"type": "file", "path": path.replace("{tmp}", str(tmp_path))})

    assert "outside.png" not in error.message and str(tmp_path) not in error.message


# -- the declared media type -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["base64", "file"])
async def test_a_png_declared_as_jpeg_is_refused(
    app: Application, tmp_path: Path, kind: str
) -> None:
    (tmp_path / "inputs" / "source.png").write_bytes(SOURCE)
    payload = (
        {"data": base64.b64encode(SOURCE).decode()} if kind == "base64" else {"path": "source.png"}
    )

    error = await refused(app, {"type": kind, **payload, "media_type": "image/jpeg"})

    assert error.details["detected_media_type"] == "image/png"


async def test_a_declared_type_that_matches_is_accepted(app: Application) -> None:
    item = {
        "type": "base64",
        "data": base64.b64encode(jpeg(12, 12)).decode(),
        "media_type": "image/jpg",  # an alias of image/jpeg
    }
    response = await app.runtime.execute(edit_with(item))
    assert len(response.data) == 1


# -- remote inputs: the SSRF rules -----------------------------------------------------------------


async def test_url_inputs_are_refused_while_remote_inputs_are_disabled(app: Application) -> None:
    error = await refused(app, {"type": "url", "url": "https://example.com/a.png"})
    assert error.message == "remote image inputs are disabled"


@pytest.mark.usefixtures("no_external_network")
@pytest.mark.parametrize("url", SSRF_URLS)
async def test_private_and_link_local_urls_are_refused(tmp_path: Path, url: str) -> None:
    application = build(tmp_path, "inputs.remote.enabled=true")
    try:
        error = await refused(application, {"type": "url", "url": url})
    finally:
        await application.aclose()
    assert error.message == "remote image hostname resolves to a private or reserved address"
    assert "://" not in str(error.to_dict())  # the URL itself never appears in the error
