"""Image responses: serialized on the loop when small, in a worker thread when large."""

from __future__ import annotations

import json
from typing import Any

import pytest

from imagebridge.contract.request import GenerationParameters
from imagebridge.contract.response import ImageResponse
from imagebridge.server import routes
from tests.support.fakes import image_item, png_bytes


def image_response(data: bytes) -> ImageResponse:
    params = GenerationParameters()
    return ImageResponse(
        id="r",
        created=1,
        provider="p",
        model="m",
        requested=params,
        effective=params,
        data=[image_item(0, data)],
    )


@pytest.mark.parametrize(
    ("base64_chars", "threaded"),
    [(4_000, False), (routes.OFFLOAD_BYTES, False), (routes.OFFLOAD_BYTES + 4, True)],
)
async def test_only_large_image_payloads_are_serialized_in_a_thread(
    monkeypatch: pytest.MonkeyPatch, base64_chars: int, threaded: bool
) -> None:
    offloaded: list[Any] = []
    real_to_thread = routes.asyncio.to_thread

    async def to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        offloaded.append(func)
        return await real_to_thread(func, *args, **kwargs)

    monkeypatch.setattr(routes.asyncio, "to_thread", to_thread)
    model = image_response(png_bytes(8, 8))
    model.data[0].b64_json = "A" * base64_chars  # only the size of the base64 counts

    answer = await routes.large_json_response(model)

    assert bool(offloaded) is threaded
    assert json.loads(bytes(answer.body)) == json.loads(model.model_dump_json())
    assert answer.media_type == "application/json"


def test_the_large_path_writes_the_same_json_as_pydantic() -> None:
    """orjson writes large responses: same keys, order, omissions and values, byte for byte."""
    params = GenerationParameters()
    failure = {
        "index": 1,
        "error": {"code": "upstream", "message": 'é ✓ "quoted"\n', "details": {"r": 0.1}},
        "generation_ms": 7,
    }
    model = ImageResponse.model_validate(
        {
            "id": "r",
            "created": 2**40,
            "provider": "p",
            "model": "m",
            "requested": params.model_dump(mode="json"),
            "effective": params.model_dump(mode="json"),
            "data": [image_item(0, png_bytes(8, 8)).model_dump(mode="json")],
            "failures": [failure],
            "normalizations": [
                {"field": "size", "requested": "1x1", "effective": [1, 2.5], "reason": "r"}
            ],
        }
    )

    assert routes._dump_large(model) == model.model_dump_json().encode()
