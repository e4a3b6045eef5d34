"""The API-key admin API: ``/v1/keys`` and ``/v1/usage`` (docs/keys.md), admin key only.

Mounted when ``server.keys.enabled``. A key calling these routes gets 403
``permission_denied``. A created or rotated key's secret is in that one answer only.
Operation ids and schemas are named ``BridgeKey…``: the original has no such routes, and
its document's names stay untouched. Bodies and answers are the shapes of
``contract/keys.py``; every route goes through the key service, never its store.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.keys import BridgeKeyIssued, BridgeKeyUsageReport
from imagebridge.keys import KeyService, read_create, read_update
from imagebridge.server.context import request_context
from imagebridge.server.openapi import ERROR_RESPONSES, query_parameter
from imagebridge.server.query import strict_query
from imagebridge.server.routes import admin_router, json_response
from imagebridge.server.state import bridge_state

router = admin_router(tags=["keys"])

ADMIN_ACTOR = "admin-api"
_INVALID_QUERY = "key query parameters are invalid"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MAX_BODY_BYTES = 16_384

_LIMIT_PROPERTIES: dict[str, Any] = {  # BridgeKeyUpdate's fields (tests/keys/test_wire.py)
    "images_per_day": {"type": ["integer", "null"], "minimum": 0},
    "images_per_week": {"type": ["integer", "null"], "minimum": 0},
    "images_per_month": {"type": ["integer", "null"], "minimum": 0},
    "max_concurrent": {"type": ["integer", "null"], "minimum": 1},
    "providers": {"type": ["array", "null"], "items": {"type": "string"}},
    "expires_at": {"type": ["integer", "null"], "description": "Unix time"},
}


def _body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "required": required,
    }
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _issued(issued: BridgeKeyIssued, status_code: int = 200) -> Response:
    """The one answer that shows a secret: never stored by a cache."""
    response = json_response(issued, status_code)
    if status_code == 201:
        response.headers["location"] = f"/v1/keys/{issued.key.id}"
    response.headers["cache-control"] = "no-store"
    return response


def admin_keys(request: Request) -> KeyService:
    """The key service, for the admin only (403 for a key)."""
    principal = request_context(request).principal
    if principal is None or not principal.admin:
        raise BridgeError(ErrorCode.PERMISSION_DENIED, "only the admin key may manage API keys")
    keys = bridge_state(request).access.keys
    if keys is None:  # pragma: no cover - the router is mounted only with keys
        raise BridgeError(ErrorCode.CONFIGURATION, "API keys are not enabled")
    return keys


async def _json_object(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > _MAX_BODY_BYTES:
        raise BridgeError.invalid_request("key request body is too large")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise BridgeError.invalid_request("request body must be a JSON object") from None
    if not isinstance(value, dict):
        raise BridgeError.invalid_request("request body must be a JSON object")
    return value


@router.get(
    "/v1/keys",
    operation_id="listBridgeKeys",
    responses={200: {"description": "Every API key (never a secret)"}, **ERROR_RESPONSES},
)
async def list_keys(request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    keys = admin_keys(request)
    return json_response(await keys.listing())


@router.post(
    "/v1/keys",
    operation_id="createBridgeKey",
    status_code=201,
    responses={201: {"description": "The key and its secret, shown once"}, **ERROR_RESPONSES},
    openapi_extra={
        "requestBody": _body({"name": {"type": "string"}, **_LIMIT_PROPERTIES}, ["name"])
    },
)
async def create_key(request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    keys = admin_keys(request)
    body = read_create(await _json_object(request))
    return _issued(await keys.create(body, actor=ADMIN_ACTOR), 201)


@router.get(
    "/v1/keys/{id}",
    operation_id="getBridgeKey",
    responses={200: {"description": "One API key"}, **ERROR_RESPONSES},
)
async def get_key(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    keys = admin_keys(request)
    return json_response(await keys.show(id))


@router.patch(
    "/v1/keys/{id}",
    operation_id="updateBridgeKey",
    responses={200: {"description": "The updated key"}, **ERROR_RESPONSES},
    openapi_extra={"requestBody": _body(_LIMIT_PROPERTIES, [])},
)
async def update_key(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    keys = admin_keys(request)
    raw = await _json_object(request)
    await keys.get(id)  # a missing key is 404 whatever its body says
    return json_response(await keys.update(id, read_update(raw), actor=ADMIN_ACTOR))


@router.delete(
    "/v1/keys/{id}",
    operation_id="revokeBridgeKey",
    responses={200: {"description": "The revoked key"}, **ERROR_RESPONSES},
)
async def revoke_key(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    keys = admin_keys(request)
    return json_response(await keys.revoke(id, actor=ADMIN_ACTOR))


@router.post(
    "/v1/keys/{id}/rotate",
    operation_id="rotateBridgeKey",
    responses={200: {"description": "The key and its new secret, shown once"}, **ERROR_RESPONSES},
)
async def rotate_key(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    keys = admin_keys(request)
    return _issued(await keys.rotate(id, actor=ADMIN_ACTOR))


_USAGE_QUERY = ("key", "provider", "account", "since", "until")


@router.get(
    "/v1/usage",
    operation_id="listBridgeKeyUsage",
    responses={200: {"description": "Images per key, day, provider, account"}, **ERROR_RESPONSES},
    openapi_extra={
        "parameters": [
            query_parameter("key", {"type": "string", "description": "key id or name"}),
            query_parameter("provider", {"type": "string"}),
            query_parameter("account", {"type": "string"}),
            query_parameter("since", {"type": "string", "format": "date"}),
            query_parameter("until", {"type": "string", "format": "date"}),
        ]
    },
)
async def list_usage(request: Request) -> Response:
    query = strict_query(request, _USAGE_QUERY, _INVALID_QUERY)
    keys = admin_keys(request)
    for name in ("since", "until"):
        if name in query and not _DATE.match(query[name]):
            raise BridgeError.invalid_request(f"{name} must be a date (YYYY-MM-DD)", field=name)
    rows = await keys.usage(
        key=query.get("key"),
        provider=query.get("provider"),
        account=query.get("account"),
        since=query.get("since"),
        until=query.get("until"),
    )
    if rows is None:  # the key filter names no key
        return json_response(BridgeKeyUsageReport(data=[]))
    return json_response(BridgeKeyUsageReport(time_zone=keys.time_zone, data=rows))
