"""``POST /v1/images``: one synchronous native generate or edit."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.server.execution import apply_idempotency_header, execute_image, idempotency_header
from imagebridge.server.openapi import ERROR_RESPONSES, idempotency_parameter, json_request_body
from imagebridge.server.routes import decode_body, large_json_response, protected_router
from imagebridge.server.state import bridge_state

__all__ = ["DECODE_MESSAGE", "decode_image_request", "router"]

router = protected_router(tags=["images"])

DECODE_MESSAGE = "request body must be valid ImageRequest JSON"


async def decode_image_request(request: Request) -> ImageRequest:
    return await decode_body(ImageRequest, request, DECODE_MESSAGE)


@router.post(
    "/v1/images",
    operation_id="executeImage",
    responses={200: {"model": ImageResponse, "description": "Verified images"}, **ERROR_RESPONSES},
    openapi_extra={
        "parameters": [idempotency_parameter],
        "requestBody": json_request_body("ImageRequest"),
    },
)
async def create_image(request: Request) -> Response:
    image_request = await decode_image_request(request)
    response = await execute_image(
        bridge_state(request),
        request,
        lambda: apply_idempotency_header(image_request, idempotency_header(request)),
    )
    return await large_json_response(response)
