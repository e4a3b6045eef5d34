"""HTTP routes, one small module per area; :func:`protected_router` adds the access check."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

import orjson
from fastapi import APIRouter, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract._base import decode_model
from imagebridge.server.context import request_context
from imagebridge.server.state import bridge_state

__all__ = [
    "OFFLOAD_BYTES",
    "decode_body",
    "json_response",
    "large_json_response",
    "protected_router",
    "public_router",
    "require_access",
]

M = TypeVar("M", bound=BaseModel)

OFFLOAD_BYTES = 1024 * 1024
"""Bodies above this are decoded in a worker thread, never on the event loop."""

bridge_bearer = HTTPBearer(
    scheme_name="bridgeBearer",
    auto_error=False,
    description="Optional bridge token, separate from provider OAuth.",
)


async def require_access(
    request: Request,
    _documented: HTTPAuthorizationCredentials | None = Security(bridge_bearer),  # noqa: B008
) -> None:
    """Browser-origin guard, then the exact bearer check; records the caller's scope.

    ``_documented`` only declares the scheme in OpenAPI: the header is checked here,
    exactly (``Bearer`` with that case and one space), not by FastAPI's lenient parser.
    """
    state = bridge_state(request)
    request_context(request).owner = state.access.authorize(request.scope["headers"])


def protected_router(**kwargs: Any) -> APIRouter:
    return APIRouter(dependencies=[Security(require_access)], **kwargs)


def public_router(**kwargs: Any) -> APIRouter:
    return APIRouter(**kwargs)


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    """Serialize a contract model with its omission rules (no re-validation)."""
    return Response(model.model_dump_json(), status_code=status_code, media_type="application/json")


async def large_json_response(model: BaseModel, status_code: int = 200) -> Response:
    """Like :func:`json_response`, serialized in a worker thread when its images are big.

    Up to :data:`OFFLOAD_BYTES` of base64 the thread hop costs more than the work (the
    same bound as :func:`decode_body`).
    """
    if _image_payload_chars(model) <= OFFLOAD_BYTES:
        return json_response(model, status_code)
    content = await asyncio.to_thread(_dump_large, model)
    return Response(content, status_code=status_code, media_type="application/json")


def _dump_large(model: BaseModel) -> bytes:
    """The same JSON as ``model_dump_json``, written by orjson.

    ``model_dump(mode="json")`` applies the same omission rules and keeps the payload
    strings by reference; orjson then writes a 4 MB base64 string ~7x faster than
    pydantic's serializer (bench/gateway.py). Anything orjson refuses falls back.
    """
    try:
        return orjson.dumps(model.model_dump(mode="json"))
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return model.model_dump_json().encode()


def _image_payload_chars(model: BaseModel) -> int:
    """The base64 characters an image response carries (unknown shapes count as large)."""
    data = getattr(model, "data", None)
    if not isinstance(data, list):
        return OFFLOAD_BYTES + 1
    return sum(len(getattr(item, "b64_json", None) or "") for item in data)


async def decode_body(model: type[M], request: Request, message: str) -> M:
    """Read and decode a JSON body; large bodies (inline images) decode off the loop."""
    body = await request.body()
    if len(body) > OFFLOAD_BYTES:
        return await asyncio.to_thread(decode_model, model, body, message)
    return decode_model(model, body, message)
