"""Presets: named request templates, global to the bridge.

With named API keys (docs/keys.md) presets are the team's shared templates: every key may
list, read and use them, only the admin may create, replace or delete one (403 for a key),
so no key can change or remove a template another person relies on.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.presets import (
    ImagePreset,
    ImagePresetCreate,
    ImagePresetPage,
    ImagePresetWrite,
)
from imagebridge.jobs import PresetService
from imagebridge.server.context import request_context
from imagebridge.server.openapi import ERROR_RESPONSES, json_request_body, query_parameter
from imagebridge.server.query import (
    MAX_CURSOR_CHARS,
    MAX_PAGE_LIMIT,
    integer_parameter,
    strict_query,
)
from imagebridge.server.routes import decode_body, json_response, protected_router
from imagebridge.server.state import bridge_state

router = protected_router(tags=["presets"])

_INVALID_QUERY = "preset query parameters are invalid"
_DECODE = "request body must be valid preset JSON"


def _admin_only(request: Request) -> None:
    principal = request_context(request).principal
    if principal is not None and not principal.admin:
        raise BridgeError(ErrorCode.PERMISSION_DENIED, "only the admin key may change presets")


def service(request: Request) -> PresetService:
    services = bridge_state(request).jobs
    if services is None:
        raise BridgeError(ErrorCode.OVERLOADED, "preset service is not running", retryable=True)
    return services.presets


@router.get(
    "/v1/presets",
    operation_id="listImagePresets",
    responses={200: {"model": ImagePresetPage, "description": "Preset page"}, **ERROR_RESPONSES},
    openapi_extra={
        "parameters": [
            query_parameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT}),
            query_parameter("cursor", {"type": "string", "maxLength": MAX_CURSOR_CHARS}),
        ]
    },
)
async def list_presets(request: Request) -> Response:
    query = strict_query(request, ("limit", "cursor"), _INVALID_QUERY)
    limit = integer_parameter(query.get("limit"), invalid=_INVALID_QUERY)
    return json_response(await service(request).list(limit=limit, cursor=query.get("cursor")))


@router.post(
    "/v1/presets",
    operation_id="createImagePreset",
    status_code=201,
    responses={201: {"model": ImagePreset, "description": "Created preset"}, **ERROR_RESPONSES},
    openapi_extra={"requestBody": json_request_body("ImagePresetCreate")},
)
async def create_preset(request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    _admin_only(request)
    body = await decode_body(ImagePresetCreate, request, _DECODE)
    preset = await service(request).create(body)
    response = json_response(preset, status_code=201)
    response.headers["location"] = f"/v1/presets/{preset.name}"
    return response


@router.get(
    "/v1/presets/{name}",
    operation_id="getImagePreset",
    responses={200: {"model": ImagePreset, "description": "Preset"}, **ERROR_RESPONSES},
)
async def get_preset(name: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    return json_response(await service(request).get(name))


@router.put(
    "/v1/presets/{name}",
    operation_id="replaceImagePreset",
    responses={200: {"model": ImagePreset, "description": "Replaced preset"}, **ERROR_RESPONSES},
    openapi_extra={"requestBody": json_request_body("ImagePresetWrite")},
)
async def replace_preset(name: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    _admin_only(request)
    body = await decode_body(ImagePresetWrite, request, _DECODE)
    return json_response(await service(request).replace(name, body))


@router.delete(
    "/v1/presets/{name}",
    operation_id="deleteImagePreset",
    status_code=204,
    responses={204: {"description": "Deleted"}, **ERROR_RESPONSES},
)
async def delete_preset(name: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    _admin_only(request)
    await service(request).delete(name)
    return Response(status_code=204)
