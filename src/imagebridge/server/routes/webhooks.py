"""The webhook admin API (docs/webhooks.md), admin only; mounted with ``server.webhooks``.

Endpoints are managed with OpenAI's paths and shapes, so the ``openai`` SDK's
``client.webhooks.create / retrieve / update / list / delete / rotate_secret / test`` and
``client.webhooks.event_types.list`` work against the bridge; deliveries are listed (and a
failed one sent again) under ``/v1/webhook_deliveries``. With API keys on, a key gets 403
``permission_denied``; an endpoint may belong to one key (``key_id``: it then receives that
key's events only). A secret is in the answer that made it only. Every route goes through
the webhook service, never its store.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.webhooks import (
    ALL_EVENT_TYPES,
    DELIVERY_STATES,
    BridgeWebhookDelivery,
    BridgeWebhookDeliveryError,
    BridgeWebhookDeliveryList,
    BridgeWebhookEndpoint,
    BridgeWebhookEndpointCreate,
    BridgeWebhookEndpointDeleted,
    BridgeWebhookEndpointList,
    BridgeWebhookEndpointUpdate,
    BridgeWebhookEndpointWithSecret,
    BridgeWebhookEventTypeList,
    BridgeWebhookRotateSecret,
    BridgeWebhookTest,
    BridgeWebhookTestResult,
)
from imagebridge.server.context import request_context
from imagebridge.server.openapi import ERROR_RESPONSES, query_parameter
from imagebridge.server.query import MAX_PAGE_LIMIT, page_limit, strict_query
from imagebridge.server.routes import decode_body, json_response, protected_router
from imagebridge.server.state import bridge_state
from imagebridge.storage.records import WebhookDeliveryRecord, WebhookEndpointRecord
from imagebridge.webhooks import CreatedEndpoint, WebhookService

router = protected_router(tags=["webhooks"])

_INVALID_QUERY = "webhook query parameters are invalid"
_DECODE = "request body must be a valid webhook endpoint JSON object"
_LIMIT_OUT_OF_RANGE = f"limit must be between 1 and {MAX_PAGE_LIMIT}"
_TYPES: dict[str, Any] = {"type": "array", "items": {"type": "string", "enum": ALL_EVENT_TYPES}}


def _body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "required": required,
    }
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def _page_parameters(*extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "parameters": [
            query_parameter("after", {"type": "string"}),
            query_parameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT}),
            *extra,
        ]
    }


def admin_webhooks(request: Request) -> WebhookService:
    """The webhook service, for the admin only (403 for a key)."""
    principal = request_context(request).principal
    if principal is None or not principal.admin:
        raise BridgeError(ErrorCode.PERMISSION_DENIED, "only the admin key may manage webhooks")
    webhooks = bridge_state(request).webhooks
    if webhooks is None:  # the lifespan failed before opening it
        raise BridgeError(ErrorCode.CONFIGURATION, "webhooks are not available")
    return webhooks


def endpoint_view(record: WebhookEndpointRecord) -> BridgeWebhookEndpoint:
    return BridgeWebhookEndpoint(
        id=record.id,
        created_at=record.created_at,
        updated_at=record.updated_at,
        name=record.name,
        url=record.url,
        event_types=list(record.event_types),  # type: ignore[arg-type]  # checked types
        signing_secret_hint=record.secret_hint,
        key_id=record.key_id,
        source="config" if record.source == "config" else "api",
    )


def _issued(created: CreatedEndpoint, status_code: int = 200) -> Response:
    """The one answer that shows a secret: never stored by a cache."""
    view = endpoint_view(created.endpoint)
    issued = BridgeWebhookEndpointWithSecret(**view.model_dump(), signing_secret=created.secret)
    response = json_response(issued, status_code)
    response.headers["cache-control"] = "no-store"
    return response


def _seconds(ms: int | None) -> int | None:
    return None if ms is None else ms // 1000


def delivery_view(record: WebhookDeliveryRecord) -> BridgeWebhookDelivery:
    error = None
    if record.last_error_code is not None:
        error = BridgeWebhookDeliveryError(code=record.last_error_code, message=record.last_error)
    return BridgeWebhookDelivery(
        id=record.id,
        event_id=record.event_id,
        event_type=record.event_type,  # type: ignore[arg-type]  # written from the closed set
        endpoint_id=record.endpoint_id,
        key_id=record.key_id,
        status=record.status,  # type: ignore[arg-type]  # the store's closed set
        attempts=record.attempts,
        created_at=record.created_at // 1000,
        next_attempt_at=_seconds(record.next_attempt_at) if record.status == "pending" else None,
        last_attempt_at=_seconds(record.last_attempt_at),
        completed_at=_seconds(record.completed_at),
        expires_at=record.deadline_at // 1000,
        last_response_status=record.last_status,
        last_error=error,
    )


async def _key_id(request: Request, named: str | None) -> str | None:
    """The id of the API key an endpoint is for (an id or a name), or ``None``."""
    if named is None:
        return None
    keys = bridge_state(request).access.keys
    if keys is None:
        raise BridgeError.invalid_request(
            "key_id needs API keys (server.keys.enabled)", field="key_id"
        )
    try:
        return (await keys.find(named)).id
    except BridgeError:
        raise BridgeError.invalid_request("key_id names no API key", field="key_id") from None


# -- endpoints (OpenAI's paths and shapes) -------------------------------------------------------


@router.get(
    "/v1/webhook_event_types",
    operation_id="listBridgeWebhookEventTypes",
    responses={200: {"description": "Every event type an endpoint may take"}, **ERROR_RESPONSES},
)
async def list_event_types(request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    return json_response(BridgeWebhookEventTypeList(data=list(webhooks.event_types())))  # type: ignore[arg-type]


@router.get(
    "/v1/webhook_endpoints",
    operation_id="listBridgeWebhookEndpoints",
    responses={200: {"description": "Endpoints, newest first"}, **ERROR_RESPONSES},
    openapi_extra=_page_parameters(),
)
async def list_endpoints(request: Request) -> Response:
    query = strict_query(request, ("after", "limit"), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    limit = page_limit(query.get("limit"), invalid=_INVALID_QUERY, out_of_range=_LIMIT_OUT_OF_RANGE)
    records, more = await webhooks.list_endpoints(after=query.get("after"), limit=limit)
    views = [endpoint_view(record) for record in records]
    return json_response(
        BridgeWebhookEndpointList(
            data=views,
            first_id=views[0].id if views else None,
            last_id=views[-1].id if views else None,
            has_more=more,
        )
    )


@router.post(
    "/v1/webhook_endpoints",
    operation_id="createBridgeWebhookEndpoint",
    responses={200: {"description": "The endpoint and its secret, shown once"}, **ERROR_RESPONSES},
    openapi_extra=_body(
        {
            "name": {"type": "string"},
            "url": {"type": "string"},
            "event_types": _TYPES,
            "key_id": {"type": ["string", "null"]},
        },
        ["name", "url", "event_types"],
    ),
)
async def create_endpoint(request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    body = await decode_body(BridgeWebhookEndpointCreate, request, _DECODE)
    key_id = await _key_id(request, body.key_id)
    created = await webhooks.create_endpoint(body.name, body.url, body.event_types, key_id=key_id)
    return _issued(created)


@router.get(
    "/v1/webhook_endpoints/{id}",
    operation_id="getBridgeWebhookEndpoint",
    responses={200: {"description": "One endpoint"}, **ERROR_RESPONSES},
)
async def get_endpoint(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    return json_response(endpoint_view(await webhooks.get_endpoint(id)))


@router.post(
    "/v1/webhook_endpoints/{id}",
    operation_id="updateBridgeWebhookEndpoint",
    responses={200: {"description": "The updated endpoint"}, **ERROR_RESPONSES},
    openapi_extra=_body(
        {"name": {"type": "string"}, "url": {"type": "string"}, "event_types": _TYPES}, []
    ),
)
async def update_endpoint(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    body = await decode_body(BridgeWebhookEndpointUpdate, request, _DECODE)
    values = {name: getattr(body, name) for name in body.model_fields_set}
    return json_response(endpoint_view(await webhooks.update_endpoint(id, values)))


@router.delete(
    "/v1/webhook_endpoints/{id}",
    operation_id="deleteBridgeWebhookEndpoint",
    responses={200: {"description": "The endpoint is deleted"}, **ERROR_RESPONSES},
)
async def delete_endpoint(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    await webhooks.delete_endpoint(id)
    return json_response(BridgeWebhookEndpointDeleted(id=id))


@router.post(
    "/v1/webhook_endpoints/{id}/rotate_secret",
    operation_id="rotateBridgeWebhookEndpointSecret",
    responses={200: {"description": "The endpoint and its new secret"}, **ERROR_RESPONSES},
    openapi_extra=_body({"keep_old_secret_active_for_24_hours": {"type": "boolean"}}, []),
)
async def rotate_secret(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    raw = await request.body()
    body = (
        await decode_body(BridgeWebhookRotateSecret, request, _DECODE)
        if raw.strip()
        else BridgeWebhookRotateSecret()
    )
    created = await webhooks.rotate_secret(id, keep_old=body.keep_old_secret_active_for_24_hours)
    return _issued(created)


@router.post(
    "/v1/webhook_endpoints/{id}/test",
    operation_id="testBridgeWebhookEndpoint",
    responses={200: {"description": "What the receiver answered a sample"}, **ERROR_RESPONSES},
    openapi_extra=_body(
        {"event_type": {"type": "string", "enum": ALL_EVENT_TYPES}}, ["event_type"]
    ),
)
async def send_test_event(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    body = await decode_body(BridgeWebhookTest, request, _DECODE)
    result = await webhooks.test_endpoint(id, body.event_type)
    return json_response(
        BridgeWebhookTestResult(
            event_type=result.event_type,
            status_code=result.status_code,
            webhook_endpoint_id=result.endpoint_id,
        )
    )


# -- deliveries --------------------------------------------------------------------------------

_DELIVERY_FILTERS = ("endpoint_id", "status", "event_type", "event_id")


@router.get(
    "/v1/webhook_deliveries",
    operation_id="listBridgeWebhookDeliveries",
    responses={200: {"description": "Deliveries, newest first"}, **ERROR_RESPONSES},
    openapi_extra=_page_parameters(
        query_parameter("endpoint_id", {"type": "string"}),
        query_parameter("status", {"type": "string", "enum": list(DELIVERY_STATES)}),
        query_parameter("event_type", {"type": "string", "enum": list(ALL_EVENT_TYPES)}),
        query_parameter("event_id", {"type": "string"}),
    ),
)
async def list_deliveries(request: Request) -> Response:
    query = strict_query(request, ("after", "limit", *_DELIVERY_FILTERS), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    limit = page_limit(query.get("limit"), invalid=_INVALID_QUERY, out_of_range=_LIMIT_OUT_OF_RANGE)
    page = await webhooks.list_deliveries(
        endpoint_id=query.get("endpoint_id"),
        status=query.get("status"),
        event_type=query.get("event_type"),
        event_id=query.get("event_id"),
        after=query.get("after"),
        limit=limit,
    )
    views = [delivery_view(record) for record in page.data]
    return json_response(
        BridgeWebhookDeliveryList(
            data=views,
            first_id=views[0].id if views else None,
            last_id=views[-1].id if views else None,
            has_more=page.has_more,
        )
    )


@router.get(
    "/v1/webhook_deliveries/{id}",
    operation_id="getBridgeWebhookDelivery",
    responses={200: {"description": "One delivery"}, **ERROR_RESPONSES},
)
async def get_delivery(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    return json_response(delivery_view(await webhooks.get_delivery(id)))


@router.post(
    "/v1/webhook_deliveries/{id}/redeliver",
    operation_id="redeliverBridgeWebhookDelivery",
    responses={200: {"description": "The delivery, due again"}, **ERROR_RESPONSES},
)
async def redeliver(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    webhooks = admin_webhooks(request)
    return json_response(delivery_view(await webhooks.redeliver(id)))
