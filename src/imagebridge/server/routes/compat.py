"""OpenAI-compatible ``/v1/images/generations`` (JSON) and ``/v1/images/edits`` (multipart).

Both map onto the native request, run it like ``/v1/images`` and answer with the OpenAI
Images response shape plus the ``imagegen_bridge`` extension. Idempotency comes
from the ``Idempotency-Key`` header only.
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.compat import (
    CompatibleGenerationRequest,
    CompatImagesResponse,
    compat_response,
)
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.server.compat_models import ModelRoute, resolve_model
from imagebridge.server.execution import apply_idempotency_header, execute_image, idempotency_header
from imagebridge.server.multipart import build_edit_request, parse_edit_form
from imagebridge.server.openapi import (
    ERROR_RESPONSES,
    edit_request_body,
    idempotency_parameter,
    json_request_body,
)
from imagebridge.server.routes import decode_body, large_json_response, protected_router
from imagebridge.server.state import BridgeState, bridge_state

router = protected_router(tags=["openai-compatible"])

_GENERATION_DECODE = "request body must be valid image generation JSON"
_COMPAT_RESPONSES = {
    200: {"model": CompatImagesResponse, "description": "OpenAI-compatible images"},
    **ERROR_RESPONSES,
}


class _Routed:
    """Builds the native request (model routed, idempotency header applied) for execution."""

    def __init__(self, state: BridgeState, request: Request, image_request: ImageRequest) -> None:
        self._state = state
        self._request = request
        self._image_request = image_request
        self.route: ModelRoute | None = None

    def __call__(self) -> ImageRequest:
        keyed = apply_idempotency_header(self._image_request, idempotency_header(self._request))
        self.route = resolve_model(keyed, self._state.config, self._state.runtime.registry)
        return self.route.request

    def answer(self, response: ImageResponse) -> CompatImagesResponse:
        answer = compat_response(response)
        if self.route is not None and self.route.normalization is not None:
            answer.imagegen_bridge.normalizations.insert(0, self.route.normalization)
        return answer


async def _run(state: BridgeState, request: Request, image_request: ImageRequest) -> Response:
    routed = _Routed(state, request, image_request)
    response = await execute_image(state, request, routed)
    return await large_json_response(routed.answer(response))


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
    body = await decode_body(CompatibleGenerationRequest, request, _GENERATION_DECODE)
    try:
        image_request = body.to_request()
    except ValidationError:
        raise BridgeError.invalid_request(_GENERATION_DECODE) from None
    return await _run(bridge_state(request), request, image_request)


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
    image_request = await build_edit_request(form)
    return await _run(state, request, image_request)
