"""``GET /v1/models`` and ``/v1/models/{id}`` in OpenAI's list shape, for clients' model pickers.

One entry per image model name a client may send: ``[server.openai.models]`` routes, then each
enabled provider's models. ``owned_by`` is the provider that serves the name.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import ErrorCode
from imagebridge.contract.openai.models import CompatModel, CompatModelList
from imagebridge.server.errors import HttpError
from imagebridge.server.openai.model_names import ServedModel, served_models
from imagebridge.server.openapi import ERROR_RESPONSES
from imagebridge.server.routes import json_response, protected_router
from imagebridge.server.state import bridge_state

router = protected_router(tags=["openai-compatible"])

_CREATED = int(time.time())
"""``created`` of every entry: when this process started serving the names."""


def _entry(served: ServedModel) -> CompatModel:
    return CompatModel(id=served.id, created=_CREATED, owned_by=served.provider)


def _served(request: Request) -> list[ServedModel]:
    state = bridge_state(request)
    return served_models(state.config, state.runtime.registry)


@router.get(
    "/v1/models",
    operation_id="listModelsCompatible",
    responses={200: {"model": CompatModelList, "description": "Served models"}, **ERROR_RESPONSES},
)
async def list_models(request: Request) -> Response:
    return json_response(CompatModelList(data=[_entry(item) for item in _served(request)]))


@router.get(
    "/v1/models/{model}",
    operation_id="getModelCompatible",
    responses={200: {"model": CompatModel, "description": "One served model"}, **ERROR_RESPONSES},
)
async def get_model(request: Request, model: str) -> Response:
    for item in _served(request):
        if item.id == model:
            return json_response(_entry(item))
    raise HttpError(
        404, ErrorCode.INVALID_REQUEST, "model was not found", details={"field": "model"}
    )
