"""OpenAI model names on the compatible routes, and ``GET /v1/models``.

Every name of the installed SDK's ``ImageModel`` is read from the SDK itself, so a name a
new release adds is exercised here without editing the test.
"""

from __future__ import annotations

import base64
import io
import re
import typing
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai.types.image_model import ImageModel

from tests.server.conftest import LiveServer, ServeFactory, start_server
from tests.server.doubles import mock_of, png

SDK_IMAGE_MODELS: tuple[str, ...] = typing.get_args(ImageModel)


@pytest.fixture(scope="module")
def server(serve_module: ServeFactory) -> LiveServer:
    return serve_module()


def sdk(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)


def test_the_sdk_names_image_models() -> None:
    assert "gpt-image-2" in SDK_IMAGE_MODELS and "dall-e-3" in SDK_IMAGE_MODELS


def test_the_readme_example_works_on_the_defaults(server: LiveServer) -> None:
    result = sdk(server).images.generate(model="gpt-image-2", prompt="a paper fox", n=3)
    assert result.data is not None and len(result.data) == 3
    assert all(base64.b64decode(item.b64_json or "")[:4] == b"\x89PNG" for item in result.data)
    extension = (result.model_extra or {})["imagegen_bridge"]
    assert extension["model"] == "mock-image-1"
    assert extension["normalizations"][0] == {
        "field": "model",
        "requested": "gpt-image-2",
        "effective": "mock-image-1",
        "reason": "model_not_served_by_provider_used_default",
    }


README = Path(__file__).resolve().parents[3] / "README.md"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The shipped provider set (``codex-responses`` the default, ``mock`` on), no login."""
    root = tmp_path_factory.mktemp("shipped")
    (root / "codex-home").mkdir()
    live = start_server(
        root / "data", shipped_defaults=True, env={"CODEX_HOME": str(root / "codex-home")}
    )
    yield live
    live.stop()


def readme_openai_example() -> str:
    match = re.search(r"```python\n(from openai import OpenAI\n.*?)```", README.read_text(), re.S)
    assert match is not None, "README has no OpenAI SDK example"
    return match.group(1)


def test_the_readme_openai_example_runs_on_the_shipped_defaults(shipped: LiveServer) -> None:
    assert shipped.state.config.default_provider == "codex-responses"
    code = readme_openai_example().replace("http://127.0.0.1:8787", shipped.url)
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own snippet
    result = scope["result"]
    assert isinstance(result, openai.types.ImagesResponse)
    assert result.data is not None and len(result.data) == 3
    extension = (result.model_extra or {})["imagegen_bridge"]
    assert extension["provider"] == "mock" and extension["normalizations"] == []


def test_a_listed_model_reaches_the_provider_listed_for_it(shipped: LiveServer) -> None:
    client = sdk(shipped)
    listed = {entry.id: entry for entry in client.models.list()}
    assert "mock-image-1" in listed
    result = client.images.generate(model="mock-image-1", prompt="fox", size="16x16")
    assert (result.model_extra or {})["imagegen_bridge"]["provider"] == "mock"


def test_an_unlisted_name_on_the_shipped_defaults_goes_to_the_default_provider(
    shipped: LiveServer,
) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        sdk(shipped).images.generate(model="gpt-image-2", prompt="fox")
    assert "credentials" in str(caught.value)


@pytest.mark.parametrize("model", SDK_IMAGE_MODELS)
def test_every_sdk_image_model_generates(server: LiveServer, model: str) -> None:
    result = sdk(server).images.generate(model=model, prompt="fox", size="16x16")
    assert result.data is not None and len(result.data) == 1


@pytest.mark.parametrize("model", SDK_IMAGE_MODELS)
def test_every_sdk_image_model_edits(server: LiveServer, model: str) -> None:
    source = io.BytesIO(png(16, 16))
    source.name = "source.png"
    result = sdk(server).images.edit(model=model, image=source, prompt="blue", size="16x16")
    assert result.data is not None and len(result.data) == 1


def test_a_served_name_passes_through_without_normalization(server: LiveServer) -> None:
    result = sdk(server).images.generate(model="mock-image-1", prompt="fox", size="8x8")
    extension = (result.model_extra or {})["imagegen_bridge"]
    assert all(item["field"] != "model" for item in extension["normalizations"])


def test_a_configured_route_maps_a_name_to_a_provider_model(serve: ServeFactory) -> None:
    live = serve(
        'providers.mock.models=["mock-image-1","mock-image-hd"]',
        'server.openai.models."gpt-image-2".provider="mock"',
        'server.openai.models."gpt-image-2".model="mock-image-hd"',
    )
    result = sdk(live).images.generate(model="gpt-image-2", prompt="fox", size="8x8")
    extension = (result.model_extra or {})["imagegen_bridge"]
    assert extension["model"] == "mock-image-hd"
    assert extension["normalizations"][0]["reason"] == "openai_model_route"
    listed = [item.id for item in sdk(live).models.list()]
    assert listed == ["gpt-image-2", "mock-image-1", "mock-image-hd"]


def test_refuse_makes_an_unknown_name_a_400_naming_model(serve: ServeFactory) -> None:
    live = serve('server.openai.unknown_models="refuse"')
    mock = mock_of(live)
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(live).images.generate(model="gpt-image-2", prompt="fox", size="8x8")
    assert caught.value.param == "model"
    assert mock.calls == 0
    ok = sdk(live).images.generate(model="mock-image-1", prompt="fox", size="8x8")
    assert ok.data is not None


def test_models_list_in_openai_shape(server: LiveServer) -> None:
    client = sdk(server)
    page = client.models.list()
    assert [(m.id, m.object, m.owned_by) for m in page.data] == [("mock-image-1", "model", "mock")]
    one = client.models.retrieve("mock-image-1")
    assert one.id == "mock-image-1" and isinstance(one.created, int)
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("no-such-model")
    assert caught.value.param == "model"
