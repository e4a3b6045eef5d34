"""OpenAI-compatible ``/v1/images/generations`` (JSON) and ``/v1/images/edits`` (multipart).

Both map onto the native request, run it like ``/v1/images`` and answer with the OpenAI
Images response shape plus the ``imagegen_bridge`` extension. Idempotency comes
from the ``Idempotency-Key`` header only.
"""

from __future__ import annotations

import asyncio

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.openai.fields import Translation, validation_refusal
from imagebridge.contract.openai.images import (
    CompatibleGenerationRequest,
    CompatImagesResponse,
    compat_response,
)
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.server.execution import apply_idempotency_header, execute_image, idempotency_header
from imagebridge.server.openai.errors import openai_error
from imagebridge.server.openai.images_stream import OPENAI_SSE_EVENT_SCHEMA, stream_compatible
from imagebridge.server.openai.model_names import ModelRoute, resolve_model
from imagebridge.server.openai.multipart import build_edit_request, parse_edit_form
from imagebridge.server.openai.openapi import edit_request_body
from imagebridge.server.openapi import ERROR_RESPONSES, idempotency_parameter, json_request_body
from imagebridge.server.routes import OFFLOAD_BYTES, large_json_response, protected_router
from imagebridge.server.state import BridgeState, bridge_state
from imagebridge.storage.records import JobOrigin

router = protected_router(tags=["openai-compatible"])

_GENERATION_DECODE = "request body must be valid image generation JSON"
_COMPAT_RESPONSES = {
    200: {
        "model": CompatImagesResponse,
        "description": "OpenAI-compatible images (with `stream: true`, OpenAI's image events)",
        "content": {"text/event-stream": {"schema": OPENAI_SSE_EVENT_SCHEMA}},
    },
    **ERROR_RESPONSES,
}


class _Routed:
    """Builds the native request (model routed, idempotency header applied) for execution."""

    def __init__(
        self,
        state: BridgeState,
        request: Request,
        image_request: ImageRequest,
        translation: Translation,
    ) -> None:
        self._state = state
        self._request = request
        self._image_request = image_request
        self._translation = translation
        self.route: ModelRoute | None = None

    def __call__(self) -> ImageRequest:
        keyed = apply_idempotency_header(self._image_request, idempotency_header(self._request))
        self.route = resolve_model(keyed, self._state.config, self._state.runtime.registry)
        return self.route.request

    def answer(self, response: ImageResponse) -> CompatImagesResponse:
        answer = compat_response(response)
        extension = answer.imagegen_bridge
        added = list(self._translation.normalizations)
        if self.route is not None and self.route.normalization is not None:
            added.insert(0, self.route.normalization)
        extension.normalizations[:0] = added
        for warning in self._translation.warnings:
            if warning not in extension.warnings:
                extension.warnings.append(warning)
        return answer


async def _run(
    state: BridgeState, request: Request, image_request: ImageRequest, translation: Translation
) -> Response:
    routed = _Routed(state, request, image_request, translation)
    try:
        response = await execute_image(state, request, routed, origin=JobOrigin.OPENAI)
    except BridgeError as error:
        raise openai_error(error) from None
    return await large_json_response(routed.answer(response))


def _decode_generation(body: bytes) -> CompatibleGenerationRequest:
    try:
        return CompatibleGenerationRequest.model_validate_json(body)
    except ValidationError as exc:
        raise validation_refusal(exc, _GENERATION_DECODE) from None
    except (ValueError, TypeError, RecursionError):
        raise BridgeError.invalid_request(_GENERATION_DECODE) from None


@router.post(
    "/v1/images/generations",
    operation_id="generateImageCompatible",
    responses=_COMPAT_RESPONSES,
    openapi_extra={
        "parameters": [idempotency_parameter],
        "requestBody": json_request_body("CompatibleGenerationRequest"),
    },
)
async def generate_compatible(request: Request) -> Response:
    raw = await request.body()
    if len(raw) > OFFLOAD_BYTES:
        body = await asyncio.to_thread(_decode_generation, raw)
    else:
        body = _decode_generation(raw)
    translation = body.translate()
    try:
        image_request = body.to_request(translation=translation)
    except ValidationError as exc:
        raise openai_error(validation_refusal(exc, _GENERATION_DECODE)) from None
    state = bridge_state(request)
    if body.stream:
        routed = _Routed(state, request, image_request, translation)
        return stream_compatible(state, request, image_request, routed, "image_generation")
    return await _run(state, request, image_request, translation)


@router.post(
    "/v1/images/edits",
    operation_id="editImageCompatible",
    responses=_COMPAT_RESPONSES,
    openapi_extra={"parameters": [idempotency_parameter], "requestBody": edit_request_body},
)
async def edit_compatible(request: Request) -> Response:
    state = bridge_state(request)
    form = await parse_edit_form(
        request, max_image_bytes=state.config.artifacts.image.max_encoded_bytes
    )
    edit = await build_edit_request(form)
    if edit.stream:
        routed = _Routed(state, request, edit.request, edit.translation)
        return stream_compatible(state, request, edit.request, routed, "image_edit")
    return await _run(state, request, edit.request, edit.translation)
