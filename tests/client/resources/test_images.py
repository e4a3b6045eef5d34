"""``client.images`` against a real bridge: native, streaming and OpenAI-compatible routes."""

from __future__ import annotations

import base64
import hashlib
import io
from pathlib import Path

import pytest
from PIL import Image

from imagebridge.client import (
    BridgeAPIError,
    BridgeError,
    CompletedEvent,
    ErrorCode,
    PartialImageEvent,
    ProgressEvent,
    StartedEvent,
    StreamError,
    file_input,
)
from imagebridge.contract.openai.images import CompatImagesResponse
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from tests.client.conftest import Client, collect, resolve
from tests.support.images import png_bytes

SMALL = {"size": "32x24"}


def decoded(item_b64: str) -> Image.Image:
    image = Image.open(io.BytesIO(base64.b64decode(item_b64)))
    image.load()
    return image


async def test_generate_from_a_prompt_string_and_a_mapping(api: Client) -> None:
    quick = await resolve(api.images.generate("a paper fox"))
    assert isinstance(quick, ImageResponse)
    assert quick.provider == "mock"
    response = await resolve(
        api.images.generate({"prompt": "a paper fox", "parameters": {**SMALL, "n": 2}})
    )
    assert [item.index for item in response.data] == [0, 1]
    for item in response.data:
        assert item.b64_json is not None
        image = decoded(item.b64_json)
        assert image.size == (32, 24)
        assert hashlib.sha256(base64.b64decode(item.b64_json)).hexdigest() == item.sha256


async def test_generate_accepts_a_contract_model_and_passes_the_request_id(api: Client) -> None:
    request = ImageRequest.model_validate(
        {"operation": "generate", "prompt": "a fox", "parameters": SMALL}
    )
    response = await resolve(api.images.generate(request, request_id="caller-request-7"))
    assert response.id == "caller-request-7"


async def test_edit_sends_a_local_file_inline(api: Client, tmp_path: Path) -> None:
    source = tmp_path / "source.png"
    source.write_bytes(png_bytes(20, 10, "blue"))
    response = await resolve(
        api.images.edit(
            {
                "prompt": "make it green",
                "images": [file_input(source).model_dump(mode="json")],
                "parameters": {"size": "20x10"},
            }
        )
    )
    assert len(response.data) == 1
    assert decoded(response.data[0].b64_json or "").size == (20, 10)


async def test_generate_refuses_an_edit_request_before_sending(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.images.generate({"operation": "edit", "prompt": "x", "images": []}))
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.status_code is None
    assert caught.value.field == "operation"


async def test_a_malformed_request_names_fields_not_values(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(
            api.images.generate({"prompt": "secret words", "parameters": {"size": "1024X1024"}})
        )
    error = caught.value
    assert error.code is ErrorCode.INVALID_REQUEST
    assert error.details["fields"] == ["parameters.size"]
    assert "secret words" not in str(error.to_dict())
    assert isinstance(error, BridgeError)


async def test_validation_failure_carries_issues_status_and_request_id(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(
            api.images.generate(
                {"prompt": "x", "parameters": {"n": 0}, "timeout_ms": 0},
                request_id="validation-1",
            )
        )
    error = caught.value
    assert error.status_code == 422
    assert error.code is ErrorCode.INVALID_REQUEST
    assert error.request_id == "validation-1"
    assert [issue["field"] for issue in error.details["issues"]] == ["parameters.n", "timeout_ms"]
    assert error.suggestions
    assert error.retryable is False
    assert error.error_type == "invalid_request_error"


async def test_stream_yields_typed_events_in_order(api: Client) -> None:
    stream = await resolve(
        api.images.stream(
            {"prompt": "a fox", "parameters": {**SMALL, "partial_images": 2}},
            request_id="stream-7",
        )
    )
    events = await collect(stream)
    assert isinstance(events[0], StartedEvent)
    assert isinstance(events[1], ProgressEvent)
    partials = [event for event in events if isinstance(event, PartialImageEvent)]
    assert [(p.index, p.partial_index) for p in partials] == [(0, 0), (0, 1)]
    assert decoded(partials[0].b64_json).format == "PNG"
    assert isinstance(events[-1], CompletedEvent)
    assert events[-1].response.id == "stream-7"
    assert stream.request_id == "stream-7"
    order = [event.type for event in events]
    assert order.index("partial_image") < order.index("completed")


async def test_stream_validation_errors_arrive_as_a_stream_error_event(api: Client) -> None:
    stream = await resolve(api.images.stream({"prompt": ""}))
    events = await collect(stream)
    assert [event.type for event in events] == ["started", "error"]
    failure = events[-1]
    assert isinstance(failure, StreamError)
    assert failure.error.code is ErrorCode.INVALID_REQUEST
    assert failure.error.status_code == 422
    assert failure.error.details["issues"][0]["field"] == "prompt"
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(stream.final_response())
    assert caught.value is failure.error


async def test_stream_final_response_returns_the_completed_response(api: Client) -> None:
    stream = await resolve(api.images.stream({"prompt": "a fox", "parameters": SMALL}))
    response = await resolve(stream.final_response())
    assert isinstance(response, ImageResponse)
    assert response.data[0].width == 32


async def test_stream_header_errors_raise_before_any_event(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(
            api.images.stream({"prompt": "x", "idempotency_key": "b"}, idempotency_key="a")
        )
    assert caught.value.status_code == 422
    assert caught.value.field == "idempotency_key"


async def test_a_malformed_idempotency_key_is_refused_locally(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.images.stream({"prompt": "x"}, idempotency_key="a b"))
    assert caught.value.field == "idempotency_key"
    assert caught.value.status_code is None  # never sent


async def test_openai_compatible_generation(api: Client) -> None:
    response = await resolve(api.images.generations({"prompt": "a fox", "size": "32x24", "n": 2}))
    assert isinstance(response, CompatImagesResponse)
    assert len(response.data) == 2
    assert decoded(response.data[0].b64_json or "").size == (32, 24)
    assert response.imagegen_bridge.provider == "mock"
    assert response.data[0].revised_prompt is not None


async def test_openai_compatible_generation_rejects_unknown_fields_locally(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.images.generations({"prompt": "a fox", "tempo": "vivid"}))
    assert caught.value.details["fields"] == ["tempo"]


async def test_openai_compatible_multipart_edit(api: Client, tmp_path: Path) -> None:
    path = tmp_path / "photo.png"
    path.write_bytes(png_bytes(24, 12))
    response = await resolve(
        api.images.edits(image=[path, ("second.png", png_bytes(24, 12))], prompt="x", size="24x12")
    )
    assert len(response.data) == 1
    assert decoded(response.data[0].b64_json or "").size == (24, 12)


async def test_multipart_edit_without_images_fails_locally(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.images.edits(image=[], prompt="x"))
    assert caught.value.field == "image"


async def test_provider_failures_map_to_their_status_and_code(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.images.generate("[mock:fail=safety_rejected] a fox"))
    error = caught.value
    assert error.status_code == 422
    assert error.code is ErrorCode.SAFETY_REJECTED
    assert error.error_code == "moderation_blocked"
    assert error.provider == "mock"
    assert error.details["recovery"] == "revise_prompt_or_inputs"
