"""The API-key admin API: ``/v1/keys`` and ``/v1/usage`` (docs/keys.md), admin key only.

Mounted when ``server.keys.enabled``. A key calling these routes gets 403
``permission_denied``. A created or rotated key's secret is in that one answer only.
Operation ids and schemas are named ``BridgeKey…``: the original has no such routes, and
its document's names stay untouched.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.jobs.keys import KeyService
from imagebridge.server.context import request_context
from imagebridge.server.openapi import ERROR_RESPONSES, query_parameter
from imagebridge.server.query import strict_query
from imagebridge.server.routes import admin_router
from imagebridge.server.state import bridge_state

router = admin_router(tags=["keys"])

ADMIN_ACTOR = "admin-api"
_INVALID_QUERY = "key query parameters are invalid"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MAX_BODY_BYTES = 16_384

_LIMIT_PROPERTIES: dict[str, Any] = {
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


def _answer(body: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status_code, media_type="application/json")


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
    return _answer({"data": [keys.describe(record) for record in await keys.list()]})


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
    body = await _json_object(request)
    name = body.pop("name", None)
    record, secret = await keys.create(
        name if isinstance(name, str) else "", body, actor=ADMIN_ACTOR
    )
    response = _answer({"key": keys.describe(record), "secret": secret}, 201)
    response.headers["location"] = f"/v1/keys/{record.id}"
    response.headers["cache-control"] = "no-store"
    return response


@router.get(
    "/v1/keys/{id}",
    operation_id="getBridgeKey",
    responses={200: {"description": "One API key"}, **ERROR_RESPONSES},
)
async def get_key(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    keys = admin_keys(request)
    return _answer(keys.describe(await keys.get(id)))


@router.patch(
    "/v1/keys/{id}",
    operation_id="updateBridgeKey",
    responses={200: {"description": "The updated key"}, **ERROR_RESPONSES},
    openapi_extra={"requestBody": _body(_LIMIT_PROPERTIES, [])},
)
async def update_key(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    keys = admin_keys(request)
    body = await _json_object(request)
    return _answer(keys.describe(await keys.update(id, body, actor=ADMIN_ACTOR)))


@router.delete(
    "/v1/keys/{id}",
    operation_id="revokeBridgeKey",
    responses={200: {"description": "The revoked key"}, **ERROR_RESPONSES},
)
async def revoke_key(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    keys = admin_keys(request)
    return _answer(keys.describe(await keys.revoke(id, actor=ADMIN_ACTOR)))


@router.post(
    "/v1/keys/{id}/rotate",
    operation_id="rotateBridgeKey",
    responses={200: {"description": "The key and its new secret, shown once"}, **ERROR_RESPONSES},
)
async def rotate_key(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    keys = admin_keys(request)
    record, secret = await keys.rotate(id, actor=ADMIN_ACTOR)
    response = _answer({"key": keys.describe(record), "secret": secret})
    response.headers["cache-control"] = "no-store"
    return response


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
    key_id = None
    names = {record.id: record.name for record in await keys.list()}
    if "key" in query:
        wanted = query["key"]
        key_id = next((i for i, n in names.items() if wanted in (i, n)), None)
        if key_id is None:
            return _answer({"group_by": "day", "data": []})
    rows = await keys.store.usage(
        key_id=key_id,
        provider=query.get("provider"),
        account=query.get("account"),
        since=query.get("since"),
        until=query.get("until"),
    )
    data = [{**row.to_dict(), "key_name": names.get(row.key_id)} for row in rows]
    return _answer({"group_by": "day", "time_zone": keys.settings.time_zone, "data": data})
