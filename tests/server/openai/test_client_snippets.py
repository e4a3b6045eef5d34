"""The Open WebUI and LibreChat settings in docs/api-decisions.md, replayed.

The settings are read from the page itself; the requests are the ones each client builds
from them (Open WebUI ``backend/open_webui/routers/images.py``: JSON generations, aiohttp
multipart edits with ``image`` or ``image[]`` parts named ``<uuid>.png``; LibreChat
``OpenAIImageTools``: the Node SDK's ``images.generate`` with its tool defaults, an axios
multipart edit with ``image[]`` parts). Each answer must be what that client reads: a
``data`` list whose items carry ``b64_json`` (and ``output_format`` for LibreChat).
"""

from __future__ import annotations

import base64
import re
import uuid
from pathlib import Path

import httpx
import pytest
from openai.types.images_response import ImagesResponse

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import png

PAGE = Path(__file__).resolve().parents[3] / "docs" / "api-decisions.md"
DOCUMENTED_BASE = "http://127.0.0.1:8787/v1"


def snippet(title: str) -> dict[str, str]:
    """``KEY=VALUE`` lines of the fenced block whose first line is ``# <title>``."""
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    for block in blocks:
        lines = block.strip().splitlines()
        if lines and lines[0] == f"# {title}":
            return dict(line.split("=", 1) for line in lines[1:] if "=" in line)
    raise AssertionError(f"no {title} snippet in {PAGE.name}")


OPEN_WEBUI = snippet("Open WebUI")
LIBRECHAT = snippet("LibreChat")


@pytest.fixture(scope="module")
def server(serve_module: ServeFactory) -> LiveServer:
    token = OPEN_WEBUI["IMAGES_OPENAI_API_KEY"]
    assert token == LIBRECHAT["IMAGE_GEN_OAI_API_KEY"]
    return serve_module('server.bearer_token_env="BRIDGE_TOKEN"', env={"BRIDGE_TOKEN": token})


def base_url(server: LiveServer, documented: str) -> str:
    assert documented == DOCUMENTED_BASE
    return documented.replace("http://127.0.0.1:8787", server.url)


def images_of(response: httpx.Response) -> list[bytes]:
    assert response.status_code == 200, response.text
    body = response.json()
    ImagesResponse.model_validate(body, strict=True)
    return [base64.b64decode(item["b64_json"]) for item in body["data"]]


def test_open_webui_generation(server: LiveServer) -> None:
    settings = OPEN_WEBUI
    assert settings["IMAGE_GENERATION_ENGINE"] == "openai"
    url = f"{base_url(server, settings['IMAGES_OPENAI_API_BASE_URL'])}/images/generations"
    headers = {
        "Authorization": f"Bearer {settings['IMAGES_OPENAI_API_KEY']}",
        "Content-Type": "application/json",
    }
    data = {
        "model": settings["IMAGE_GENERATION_MODEL"],
        "prompt": "a lighthouse at dawn",
        "n": 1,
        "size": settings["IMAGE_SIZE"],
        "response_format": "b64_json",  # sent unless the model matches its URL-model pattern
    }
    response = httpx.post(url, json=data, headers=headers, timeout=60)
    [image] = images_of(response)
    assert image.startswith(b"\x89PNG")


@pytest.mark.parametrize("part", ["image", "image[]"])
def test_open_webui_edit(server: LiveServer, part: str) -> None:
    settings = OPEN_WEBUI
    url = f"{base_url(server, settings['IMAGES_EDIT_OPENAI_API_BASE_URL'])}/images/edits"
    headers = {"Authorization": f"Bearer {settings['IMAGES_EDIT_OPENAI_API_KEY']}"}
    fields = {
        "model": settings["IMAGE_EDIT_MODEL"],
        "prompt": "make it night",
        "size": settings["IMAGE_EDIT_SIZE"],
        "response_format": "b64_json",
    }
    files = [(part, (f"{uuid.uuid4()}.png", png(32, 32), "image/png"))]
    if part == "image[]":
        files.append((part, (f"{uuid.uuid4()}.png", png(32, 32), "image/png")))
    response = httpx.post(url, data=fields, files=files, headers=headers, timeout=60)
    [image] = images_of(response)
    assert image.startswith(b"\x89PNG")


def test_librechat_generation(server: LiveServer) -> None:
    settings = LIBRECHAT
    url = f"{base_url(server, settings['IMAGE_GEN_OAI_BASEURL'])}/images/generations"
    headers = {"Authorization": f"Bearer {settings['IMAGE_GEN_OAI_API_KEY']}"}
    # the tool's defaults; output_compression is left out for png (undefined in the SDK)
    data = {
        "model": settings["IMAGE_GEN_OAI_MODEL"],
        "prompt": "a red bicycle",
        "n": 1,
        "background": "auto",
        "response_format": "b64_json",  # set whenever IMAGE_GEN_OAI_BASEURL is
        "output_format": "png",
        "quality": "auto",
        "size": "auto",
    }
    response = httpx.post(url, json=data, headers=headers, timeout=60)
    [image] = images_of(response)
    assert image.startswith(b"\x89PNG")
    assert response.json()["output_format"] == "png"


def test_librechat_edit(server: LiveServer) -> None:
    settings = LIBRECHAT
    url = f"{base_url(server, settings['IMAGE_GEN_OAI_BASEURL'])}/images/edits"
    headers = {"Authorization": f"Bearer {settings['IMAGE_GEN_OAI_API_KEY']}"}
    fields = {
        "model": settings["IMAGE_GEN_OAI_MODEL"],
        "prompt": "paint it blue",
        "quality": "auto",
        "size": "auto",
        "response_format": "b64_json",
        "output_format": "png",
    }
    files = [("image[]", ("upload.png", png(24, 24), "image/png"))]
    response = httpx.post(url, data=fields, files=files, headers=headers, timeout=60)
    [image] = images_of(response)
    assert image.startswith(b"\x89PNG")
    assert response.json()["output_format"] == "png"
