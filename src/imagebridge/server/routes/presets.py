"""Presets: named request templates.

Without API keys every preset is shared, as in the original. With named API keys
(docs/keys.md) each key owns its presets: it lists and reads its own with the shared ones
(the admin's) under them, and creates, replaces and deletes only its own; another key's
preset is a 404 like one that does not exist, and a shared one is read-only for a key
(403). The admin's presets are the shared ones; it reads one key's with ``?key=<id>``.
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
from imagebridge.keys import key_scope
from imagebridge.server.context import request_context
from imagebridge.server.openapi import ERROR_RESPONSES, json_request_body, query_parameter
from imagebridge.server.query import (
    MAX_CURSOR_CHARS,
    MAX_PAGE_LIMIT,
    integer_parameter,
    strict_query,
)
from imagebridge.server.routes import decode_body, json_response, protected_router
from imagebridge.server.scope import KEY_FILTER, reading_owner
from imagebridge.server.state import bridge_state
from imagebridge.storage.rules.presets import SHARED_OWNER

router = protected_router(tags=["presets"])

_INVALID_QUERY = "preset query parameters are invalid"
_DECODE = "request body must be valid preset JSON"


def _writer(request: Request) -> str:
    """Whose presets a write acts on: a key's own, else the shared ones."""
    principal = request_context(request).principal
    if principal is not None and principal.key is not None:
        return key_scope(principal.key.id)
    return SHARED_OWNER


def _reader(request: Request, query: dict[str, str]) -> tuple[str, bool]:
    """Whose presets a read acts on, and whether the shared ones show under them."""
    if KEY_FILTER in query:  # the admin's read-only view of one key's own presets
        return reading_owner(request, query), False
    owner = _writer(request)
    return owner, owner != SHARED_OWNER


async def _not_found_or_shared(presets: PresetService, name: str, error: BridgeError) -> None:
    """A key writing a shared preset is refused (403); anything else stays a 404."""
    try:
        await presets.get(name)
    except BridgeError:
        raise error from None
    raise BridgeError(
        ErrorCode.PERMISSION_DENIED, "shared presets are changed by the admin key only"
    ) from None


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
    query = strict_query(request, ("limit", "cursor", KEY_FILTER), _INVALID_QUERY)
    limit = integer_parameter(query.get("limit"), invalid=_INVALID_QUERY)
    owner, shared = _reader(request, query)
    page = await service(request).list(
        limit=limit, cursor=query.get("cursor"), owner=owner, shared=shared
    )
    return json_response(page)


@router.post(
    "/v1/presets",
    operation_id="createImagePreset",
    status_code=201,
    responses={201: {"model": ImagePreset, "description": "Created preset"}, **ERROR_RESPONSES},
    openapi_extra={"requestBody": json_request_body("ImagePresetCreate")},
)
async def create_preset(request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    body = await decode_body(ImagePresetCreate, request, _DECODE)
    preset = await service(request).create(body, owner=_writer(request))
    response = json_response(preset, status_code=201)
    response.headers["location"] = f"/v1/presets/{preset.name}"
    return response


@router.get(
    "/v1/presets/{name}",
    operation_id="getImagePreset",
    responses={200: {"model": ImagePreset, "description": "Preset"}, **ERROR_RESPONSES},
)
async def get_preset(name: str, request: Request) -> Response:
    query = strict_query(request, (KEY_FILTER,), _INVALID_QUERY)
    owner, shared = _reader(request, query)
    return json_response(await service(request).get(name, owner=owner, shared=shared))


@router.put(
    "/v1/presets/{name}",
    operation_id="replaceImagePreset",
    responses={200: {"model": ImagePreset, "description": "Replaced preset"}, **ERROR_RESPONSES},
    openapi_extra={"requestBody": json_request_body("ImagePresetWrite")},
)
async def replace_preset(name: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    body = await decode_body(ImagePresetWrite, request, _DECODE)
    presets, owner = service(request), _writer(request)
    try:
        return json_response(await presets.replace(name, body, owner=owner))
    except BridgeError as error:
        if owner == SHARED_OWNER or error.details.get("resource") != "preset":
            raise
        await _not_found_or_shared(presets, name, error)
        raise


@router.delete(
    "/v1/presets/{name}",
    operation_id="deleteImagePreset",
    status_code=204,
    responses={204: {"description": "Deleted"}, **ERROR_RESPONSES},
)
async def delete_preset(name: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    presets, owner = service(request), _writer(request)
    try:
        await presets.delete(name, owner=owner)
    except BridgeError as error:
        if owner == SHARED_OWNER or error.details.get("resource") != "preset":
            raise
        await _not_found_or_shared(presets, name, error)
        raise
    return Response(status_code=204)
