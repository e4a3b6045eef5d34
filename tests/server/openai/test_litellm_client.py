"""LiteLLM as a client: ``image_generation`` and ``image_edit`` with the bridge as ``api_base``."""

from __future__ import annotations

import base64
import io
import os

import pytest
from PIL import Image

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import png

# LiteLLM fetches its model price list from the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm

TOKEN = "litellm-bridge-token"


@pytest.fixture(scope="module")
def server(serve_module: ServeFactory) -> LiveServer:
    return serve_module('server.bearer_token_env="BRIDGE_TOKEN"', env={"BRIDGE_TOKEN": TOKEN})


def decoded(b64: str | None) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(b64 or "")))


def test_image_generation(server: LiveServer) -> None:
    result = litellm.image_generation(
        model="openai/gpt-image-2",
        prompt="a paper fox",
        n=2,
        size="64x48",
        api_base=f"{server.url}/v1",
        api_key=TOKEN,
        max_retries=0,
    )
    assert len(result.data) == 2
    assert {decoded(item.b64_json).size for item in result.data} == {(64, 48)}
    details = result.usage.input_tokens_details
    assert details["text_tokens"] == result.usage.input_tokens > 0


def test_image_edit(server: LiveServer) -> None:
    result = litellm.image_edit(
        model="openai/gpt-image-2",
        image=io.BytesIO(png(32, 32)),
        prompt="make it blue",
        size="32x32",
        api_base=f"{server.url}/v1",
        api_key=TOKEN,
    )
    assert len(result.data) == 1
    assert decoded(result.data[0].b64_json).size == (32, 32)


def test_a_refusal_reaches_litellm_with_the_field(server: LiveServer) -> None:
    with pytest.raises(litellm.BadRequestError) as caught:
        litellm.image_generation(
            model="openai/gpt-image-2",
            prompt="fox",
            output_format="gif",
            api_base=f"{server.url}/v1",
            api_key=TOKEN,
            max_retries=0,
        )
    assert caught.value.status_code == 400
    assert "output_format gif is not produced" in str(caught.value)
