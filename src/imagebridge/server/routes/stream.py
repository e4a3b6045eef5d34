"""``POST /v1/images/stream``: the native request as a server-sent event lifecycle.

Body decode, ``Idempotency-Key`` header, authentication and origin failures answer with a
plain JSON error. Anything later — intrinsic validation, negotiation, the provider —
arrives inside the 200 stream as an ``error`` event after ``started``.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.provider import EventSink
from imagebridge.server.context import request_context
from imagebridge.server.execution import apply_idempotency_header, execute_image, idempotency_header
from imagebridge.server.openapi import ERROR_RESPONSES, idempotency_parameter, json_request_body
from imagebridge.server.presence import ClientPresence
from imagebridge.server.routes import protected_router
from imagebridge.server.routes.images import decode_image_request
from imagebridge.server.state import bridge_state
from imagebridge.server.streaming import EndpointStream, EventStreamResponse
from imagebridge.storage.records import JobOrigin

router = protected_router(tags=["images"])

SSE_EVENT_SCHEMA = {
    "description": (
        "One server-sent event: `started`, then `progress` / `partial_image`, then exactly "
        "one `completed` (data: {type, response: ImageResponse}) or `error` (data: the "
        "error envelope). `data` is one line of compact JSON."
    ),
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"enum": ["started", "progress", "partial_image", "completed", "error"]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}
_EXAMPLE = (
    'event: started\ndata: {"type":"started"}\n\n'
    'event: completed\ndata: {"type":"completed","response":{}}\n\n'
)


@router.post(
    "/v1/images/stream",
    operation_id="streamImage",
    response_class=Response,
    responses={
        200: {
            "description": "Bounded image progress stream",
            "content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA, "example": _EXAMPLE}},
        },
        **ERROR_RESPONSES,
    },
    openapi_extra={
        "parameters": [idempotency_parameter],
        "requestBody": json_request_body("ImageRequest"),
    },
)
async def stream_image(request: Request) -> Response:
    # Header problems are known before any work starts, so they answer 422 directly
    # (a decided difference from the original, which reported them in the stream).
    image_request = apply_idempotency_header(
        await decode_image_request(request), idempotency_header(request)
    )
    state = bridge_state(request)
    presence = ClientPresence()

    async def operation(sink: EventSink, token: CancelToken) -> ImageResponse:
        return await execute_image(
            state,
            request,
            lambda: image_request,
            origin=JobOrigin.STREAM,
            events=sink,
            presence=presence,
            watch_client=False,
        )

    stream = EventStreamResponse(
        operation,
        request_id=request_context(request).request_id,
        heartbeat_interval=state.heartbeat_interval,
        queue_size=state.options.stream_queue_size,
        presence=presence,
    )
    return EndpointStream(stream)
