"""``POST /v1/responses``: OpenAI's Responses API with the ``image_generation`` tool.

The body is decided field by field and mapped onto a native ``ImageRequest``
(:mod:`imagebridge.contract.openai.responses`), run like every other image request
(:func:`~imagebridge.server.execution.execute_image`: keys and quotas, idempotency, the
caller's disconnect, metrics under ``route="responses"``), and answered as OpenAI's
``Response`` (:mod:`imagebridge.contract.openai.responses_output`) or, with
``stream: true``, as its event stream (:mod:`imagebridge.server.openai.responses_stream`).
Every error names the Responses field it concerns in ``param`` (``tools[0].size``,
``input[1].content[0].image_url``), whichever layer found it.

Not yet (docs/api-decisions.md, "Responses", the planned phase): ``background``,
``GET``/``cancel``/``DELETE /v1/responses/{id}``, ``previous_response_id``. Nothing is kept
after the answer, so ``store`` changes nothing today; when responses are kept they go
through one small store interface, on the history record every image operation has.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.openai.fields import validation_refusal
from imagebridge.contract.openai.responses import (
    ResponsesCreateRequest,
    ResponsesTranslation,
    translate_request,
)
from imagebridge.contract.openai.responses_output import (
    ResponseIds,
    ResponseObject,
    failed_response,
    finished_response,
)
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse, Normalization
from imagebridge.imaging.ids import uuid7
from imagebridge.server.execution import apply_idempotency_header, execute_image, idempotency_header
from imagebridge.server.openai.errors import openai_error
from imagebridge.server.openai.responses_models import route_response
from imagebridge.server.openai.responses_stream import RESPONSES_SSE_EVENT_SCHEMA, stream_response
from imagebridge.server.openapi import ERROR_RESPONSES, idempotency_parameter, json_request_body
from imagebridge.server.routes import OFFLOAD_BYTES, large_json_response, protected_router
from imagebridge.server.state import BridgeState, bridge_state
from imagebridge.storage.records import JobOrigin

__all__ = ["ResponseRun", "responses_error", "router"]

router = protected_router(tags=["openai-compatible"])

_DECODE = "request body must be a valid Responses request (JSON)"


def responses_error(error: BridgeError, translation: ResponsesTranslation) -> BridgeError:
    """The error with ``param`` (``details.field``) naming the Responses request's field."""
    return openai_error(error, translation.param)


def _new_ids() -> ResponseIds:
    return ResponseIds(
        response=f"resp_{uuid7().hex}",
        call=f"ig_{uuid7().hex}",
        message=f"msg_{uuid7().hex}",
        created_at=int(time.time()),
    )


@dataclass(slots=True)
class ResponseRun:
    """One response being made: its translation and ids, the routed native request, and
    the answers (finished or failed) in OpenAI's shape."""

    state: BridgeState
    request: Request
    translation: ResponsesTranslation
    ids: ResponseIds
    routed: ImageRequest | None = None
    normalization: Normalization | None = None

    def __call__(self) -> ImageRequest:
        """Build the native request (idempotency header, model routing) for execution."""
        keyed = apply_idempotency_header(self.translation.request, idempotency_header(self.request))
        route = route_response(
            self.translation, keyed, self.state.config, self.state.runtime.registry
        )
        self.routed, self.normalization = route.request, route.normalization
        return route.request

    @property
    def model(self) -> str:
        """The ``model`` the answer repeats: the client's, else what serves it."""
        if self.translation.body.model is not None:
            return self.translation.body.model
        routing = (self.routed or self.translation.request).routing
        registry = self.state.runtime.registry
        if routing.model is not None:
            return routing.model
        provider = routing.provider or registry.default
        models = registry.resolve(provider).descriptor.models if provider in registry.names else []
        return models[0] if models else provider

    def finished(self, response: ImageResponse) -> ResponseObject:
        route = [self.normalization] if self.normalization is not None else []
        return finished_response(
            self.translation, self.ids, response, completed_at=int(time.time()), route=route
        )

    def failed(self, error: BridgeError) -> ResponseObject:
        return failed_response(
            self.translation,
            self.ids,
            error,
            model=self.model,
            param=error.field,
            completed_at=int(time.time()),
        )


def _decode(body: bytes) -> ResponsesCreateRequest:
    try:
        return ResponsesCreateRequest.model_validate_json(body)
    except ValidationError as exc:
        raise validation_refusal(exc, _DECODE) from None
    except (ValueError, TypeError, RecursionError):
        raise BridgeError.invalid_request(_DECODE) from None


@router.post(
    "/v1/responses",
    operation_id="createResponse",
    responses={
        200: {
            "description": (
                "OpenAI's `Response` with an `image_generation_call` item and an assistant "
                "message (with `stream: true`, OpenAI's Responses events)"
            ),
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": RESPONSES_SSE_EVENT_SCHEMA},
            },
        },
        **ERROR_RESPONSES,
    },
    openapi_extra={
        "parameters": [idempotency_parameter],
        "requestBody": json_request_body("ResponsesCreateRequest"),
    },
)
async def create_response(request: Request) -> Response:
    raw = await request.body()
    if len(raw) > OFFLOAD_BYTES:
        body = await asyncio.to_thread(_decode, raw)
    else:
        body = _decode(raw)
    translation = translate_request(body)
    state = bridge_state(request)
    run = ResponseRun(state, request, translation, _new_ids())
    if body.stream:
        return stream_response(run)
    try:
        response = await execute_image(state, request, run, origin=JobOrigin.OPENAI)
    except BridgeError as error:
        raise responses_error(error, translation) from None
    return await large_json_response(run.finished(response))
