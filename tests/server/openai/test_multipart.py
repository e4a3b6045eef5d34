"""``POST /v1/images/edits`` over real HTTP: every part reaches the native request it maps to.

File parts are identified by name (``image`` / ``image[]`` repeatable,
``reference_image`` repeatable, ``mask`` once) and keep their Content-Type and filename;
text parts map onto parameters, routing, policies and the top-level fields. A recording
provider double shows what the engine handed it.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import png, with_mock
from tests.support.capabilities import SOME_INPUTS
from tests.support.fakes import FakeProvider
from tests.support.images import png_bytes


@pytest.fixture(scope="module")
def recorder() -> FakeProvider:
    return FakeProvider(
        "recorder",
        caps={
            "masks": {**SOME_INPUTS, "max_count": 1},
            "negative_prompt": "native",
            "user_attribution": "native",
        },
    )


@pytest.fixture(scope="module")
def server(serve_module: ServeFactory, recorder: FakeProvider) -> LiveServer:
    return serve_module('default_provider="recorder"', providers=with_mock(recorder))


def rgba_png(width: int, height: int) -> bytes:
    """A mask as OpenAI's rule wants it: the first image's size, with alpha."""
    return png_bytes(width, height, (0, 0, 0, 0), mode="RGBA")


def decoded(item: Any) -> bytes:
    data = item.data
    return data if isinstance(data, bytes) else base64.b64decode(data)


def test_every_file_and_text_part_reaches_the_request(
    server: LiveServer, recorder: FakeProvider
) -> None:
    first, second = png(4, 4, (10, 20, 30)), png(5, 5, (40, 50, 60))
    reference, mask = png(6, 6, (70, 80, 90)), rgba_png(4, 4)
    files = [
        ("image[]", ("first.png", first, "image/png")),
        ("image[]", ("second.png", second, "image/png")),
        ("reference_image", ("style.png", reference, "image/png")),
        ("mask", ("mask.png", mask, "image/png")),
    ]
    data = {
        "prompt": "multipart mapping",
        "n": "2",
        "model": "test-image",
        "negative_prompt": "no blur",
        "user": "user-7",
        "compatibility": "normalize",
        "revised_prompt": "omit",
        "provider": "recorder",
    }
    with server.client() as client:
        response = client.post("/v1/images/edits", files=files, data=data)
    assert response.status_code == 200, response.text
    assert len(response.json()["data"]) == 2
    sent = recorder.requests[-1]
    assert sent.prompt == "multipart mapping"
    assert sent.operation.value == "edit" and sent.images is not None
    assert [(item.filename, decoded(item)) for item in sent.images] == [
        ("first.png", first),
        ("second.png", second),
    ]
    assert [item.media_type for item in sent.images] == ["image/png", "image/png"]
    assert [(item.filename, decoded(item)) for item in sent.reference_images] == [
        ("style.png", reference)
    ]
    assert sent.mask is not None and decoded(sent.mask) == mask
    assert sent.parameters.n == 2
    assert (sent.negative_prompt, sent.user) == ("no blur", "user-7")
    assert sent.routing.model == "test-image"
    assert sent.policies.compatibility.value == "normalize"
    assert sent.policies.revised_prompt.value == "omit"
    assert all("revised_prompt" not in item for item in response.json()["data"])


def test_plain_image_parts_and_a_numeric_field_that_is_not_a_number(
    server: LiveServer, recorder: FakeProvider
) -> None:
    image = png(4, 4)
    with server.client() as client:
        ok = client.post(
            "/v1/images/edits",
            files=[("image", ("a.png", image, "image/png")), ("image", ("b.png", image, ""))],
            data={"prompt": "two plain parts"},
        )
        assert ok.status_code == 200, ok.text
        plain = recorder.requests[-1].images
        assert plain is not None
        assert [(item.filename, item.media_type) for item in plain] == [
            ("a.png", "image/png"),
            ("b.png", None),
        ]
        assert recorder.requests[-1].reference_images == []
        assert recorder.requests[-1].mask is None
        bad = client.post(
            "/v1/images/edits",
            files=[("image", ("a.png", image, "image/png"))],
            data={"prompt": "t", "n": "two"},
        )
    assert bad.status_code == 422
    assert bad.json()["error"]["message"] == "multipart n is invalid"


def test_a_truncated_form_is_malformed(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        response = client.post(
            "/v1/images/edits",
            content=b"--x\r\nnot really",
            headers={"Content-Type": "multipart/form-data; boundary=x"},
        )
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "multipart body is malformed"
