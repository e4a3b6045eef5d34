"""Edit inputs as OpenAI's SDK sends them: bytes and BytesIO, masks checked before any run."""

from __future__ import annotations

import io

import openai
import pytest
from PIL import Image

from imagebridge.engine.validation import MASK_ALPHA_MESSAGE, MASK_SIZE_MESSAGE
from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_of


@pytest.fixture(scope="module")
def server(serve_module: ServeFactory) -> LiveServer:
    return serve_module()


def encoded(width: int, height: int, mode: str = "RGB", image_format: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (width, height)).save(buffer, format=image_format)
    return buffer.getvalue()


def sdk(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)


@pytest.mark.parametrize(
    "image",
    [
        encoded(16, 16),  # bytes: the SDK declares application/octet-stream
        io.BytesIO(encoded(16, 16)),
        io.BytesIO(encoded(16, 16, image_format="JPEG")),
        ("photo", encoded(16, 16, image_format="WEBP")),  # a name with no extension
        [io.BytesIO(encoded(16, 16)), encoded(16, 16)],
    ],
    ids=["bytes", "bytesio", "jpeg-bytesio", "webp-no-extension", "two"],
)
def test_images_without_a_declared_type_are_identified_from_their_bytes(
    server: LiveServer, image: object
) -> None:
    result = sdk(server).images.edit(image=image, prompt="blue", size="16x16")  # type: ignore[arg-type]
    assert result.data is not None and len(result.data) == 1


def test_a_declared_type_that_contradicts_the_bytes_is_still_refused(server: LiveServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(server).images.edit(
            image=("a.png", encoded(16, 16, image_format="JPEG"), "image/png"), prompt="x"
        )
    assert caught.value.param == "image"


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (encoded(8, 8, "RGBA"), MASK_SIZE_MESSAGE),
        (encoded(16, 16, "RGB"), MASK_ALPHA_MESSAGE),
    ],
    ids=["smaller", "no-alpha"],
)
def test_a_mask_that_cannot_mark_the_image_is_refused_before_the_provider_runs(
    server: LiveServer, mask: bytes, message: str
) -> None:
    mock = mock_of(server)
    before = mock.calls
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(server).images.edit(image=encoded(16, 16), mask=mask, prompt="x", size="16x16")
    assert caught.value.param == "mask"
    assert message in caught.value.message
    assert mock.calls == before


def test_a_matching_mask_with_alpha_is_used(server: LiveServer) -> None:
    result = sdk(server).images.edit(
        image=encoded(16, 16), mask=encoded(16, 16, "RGBA"), prompt="x", size="16x16"
    )
    assert result.data is not None
