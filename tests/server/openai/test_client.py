"""The official ``openai`` package, pointed at the bridge, generates and edits."""

from __future__ import annotations

import base64
from pathlib import Path

import openai
import pytest

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import png

TOKEN = "openai-client-token"


@pytest.fixture
def bridge(serve: ServeFactory) -> LiveServer:
    return serve('server.bearer_token_env="BRIDGE_TOKEN"', env={"BRIDGE_TOKEN": TOKEN})


def client_for(server: LiveServer, api_key: str = TOKEN) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=api_key, max_retries=0)


def test_generate_three_images_through_fan_out(bridge: LiveServer) -> None:
    result = client_for(bridge).images.generate(
        model="mock-image-1",
        prompt="three paper foxes",
        n=3,
        size="1024x1024",
        response_format="b64_json",
    )
    assert result.data is not None and len(result.data) == 3
    images = [base64.b64decode(item.b64_json or "") for item in result.data]
    assert all(image.startswith(b"\x89PNG") for image in images)
    assert len(set(images)) == 3
    assert all(item.revised_prompt == "three paper foxes (mock rendering)" for item in result.data)


def test_edit_with_an_image_file(bridge: LiveServer, tmp_path: Path) -> None:
    source = tmp_path / "source.png"
    source.write_bytes(png(16, 16))
    with source.open("rb") as image:
        result = client_for(bridge).images.edit(image=image, prompt="make it blue", size="16x16")
    assert result.data is not None and len(result.data) == 1
    assert base64.b64decode(result.data[0].b64_json or "").startswith(b"\x89PNG")


def test_wrong_key_surfaces_as_authentication_error(bridge: LiveServer) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        client_for(bridge, api_key="wrong").images.generate(model="mock-image-1", prompt="x")
    assert caught.value.status_code == 401
    assert caught.value.code == "authentication_required"
