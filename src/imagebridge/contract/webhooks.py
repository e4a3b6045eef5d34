"""Signed webhooks: the events' names and payloads, and the admin API's shapes
(``/v1/webhook_endpoints``, ``/v1/webhook_deliveries``, docs/webhooks.md).

An addition: the original has no webhooks. The endpoint shapes are OpenAI's
(``client.webhooks.create/retrieve/update/list/delete/rotate_secret/test`` of the ``openai``
SDK work against the bridge unchanged), with two documented additions where its clients do
not look: ``key_id`` (an endpoint of one API key) and ``source`` (``api`` or ``config``).
Deliveries have no OpenAI counterpart. Schemas are named ``BridgeWebhook…``, so they never
collide with the original's names.

Event payloads are OpenAI's: ``{"id", "object": "event", "created_at", "type", "data"}``;
``response.*`` events carry ``data.id`` only (the response id), ``job.*`` events the job's
``id``, ``status`` and ``error_code``.
"""

from __future__ import annotations

from typing import Literal, get_args

from imagebridge.contract._base import (
    U16,
    U32,
    U64,
    ContractModel,
    RequestModel,
    StrictBool,
    StrictStr,
)

__all__ = [
    "ALL_EVENT_TYPES",
    "DELIVERY_STATES",
    "JOB_EVENT_TYPES",
    "RESPONSE_EVENT_TYPES",
    "BridgeWebhookDelivery",
    "BridgeWebhookDeliveryError",
    "BridgeWebhookDeliveryList",
    "BridgeWebhookEndpoint",
    "BridgeWebhookEndpointCreate",
    "BridgeWebhookEndpointDeleted",
    "BridgeWebhookEndpointList",
    "BridgeWebhookEndpointUpdate",
    "BridgeWebhookEndpointWithSecret",
    "BridgeWebhookEvent",
    "BridgeWebhookEventData",
    "BridgeWebhookEventTypeList",
    "BridgeWebhookRotateSecret",
    "BridgeWebhookTest",
    "BridgeWebhookTestResult",
    "DeliveryState",
    "JobEventType",
    "ResponseEventType",
    "WebhookEventType",
]

JobEventType = Literal["job.succeeded", "job.failed", "job.cancelled", "job.interrupted"]
"""The bridge's events for native durable jobs: ``job.<final status>``."""
ResponseEventType = Literal[
    "response.completed", "response.failed", "response.cancelled", "response.incomplete"
]
"""OpenAI's events for background responses."""
WebhookEventType = Literal[JobEventType, ResponseEventType]
DeliveryState = Literal["pending", "delivering", "delivered", "failed"]

JOB_EVENT_TYPES: tuple[str, ...] = get_args(JobEventType)
RESPONSE_EVENT_TYPES: tuple[str, ...] = get_args(ResponseEventType)
ALL_EVENT_TYPES: tuple[str, ...] = (*JOB_EVENT_TYPES, *RESPONSE_EVENT_TYPES)
DELIVERY_STATES: tuple[str, ...] = get_args(DeliveryState)


class BridgeWebhookEventData(ContractModel):
    """``data`` of an event: the object's id; for ``job.*`` also its status and error code."""

    id: StrictStr
    status: StrictStr | None = None
    error_code: StrictStr | None = None


class BridgeWebhookEvent(ContractModel):
    """The body of every delivery (OpenAI's event shape)."""

    id: StrictStr
    object: Literal["event"] = "event"
    created_at: U64
    type: WebhookEventType
    data: BridgeWebhookEventData


class BridgeWebhookEndpoint(ContractModel):
    """A receiver of events (OpenAI's ``WebhookEndpoint``, plus ``key_id`` and ``source``)."""

    id: StrictStr
    object: Literal["webhook_endpoint"] = "webhook_endpoint"
    created_at: U64
    updated_at: U64
    name: StrictStr
    url: StrictStr
    event_types: list[WebhookEventType]
    signing_secret_hint: StrictStr | None = None
    """The secret's prefix and last characters; ``null`` for a configured endpoint (its
    secret is the variable ``secret_env`` names)."""
    key_id: StrictStr | None = None
    """Added: the API key whose events alone it receives (``null``: every event)."""
    source: Literal["api", "config"] = "api"
    """Added: ``config`` endpoints are declared in ``[server.webhooks.endpoints]``; the API
    cannot change them."""


class BridgeWebhookEndpointWithSecret(BridgeWebhookEndpoint):
    """An endpoint just created or rotated: its secret, shown in this answer only."""

    signing_secret: StrictStr


class BridgeWebhookEndpointCreate(RequestModel):
    """``POST /v1/webhook_endpoints`` (OpenAI's create parameters, plus ``key_id``)."""

    name: StrictStr
    url: StrictStr
    event_types: list[StrictStr]
    key_id: StrictStr | None = None
    """Added: deliver only this API key's events (an id or a name)."""


class BridgeWebhookEndpointUpdate(RequestModel):
    """``POST /v1/webhook_endpoints/{id}``: the fields to change."""

    name: StrictStr | None = None
    url: StrictStr | None = None
    event_types: list[StrictStr] | None = None


class BridgeWebhookRotateSecret(RequestModel):
    keep_old_secret_active_for_24_hours: StrictBool = False


class BridgeWebhookTest(RequestModel):
    event_type: StrictStr


class BridgeWebhookTestResult(ContractModel):
    """What the receiver answered a sample event (OpenAI's ``WebhookEndpointTestResult``)."""

    event_type: StrictStr
    object: Literal["webhook_endpoint.test"] = "webhook_endpoint.test"
    status_code: U16
    success: Literal[True] = True
    webhook_endpoint_id: StrictStr


class BridgeWebhookEndpointDeleted(ContractModel):
    id: StrictStr
    deleted: Literal[True] = True
    object: Literal["webhook_endpoint.deleted"] = "webhook_endpoint.deleted"


class BridgeWebhookEndpointList(ContractModel):
    """A page of endpoints, newest first (OpenAI's cursor page: ``?after=&limit=``)."""

    object: Literal["list"] = "list"
    data: list[BridgeWebhookEndpoint]
    first_id: StrictStr | None = None
    last_id: StrictStr | None = None
    has_more: StrictBool


class BridgeWebhookEventTypeList(ContractModel):
    object: Literal["list"] = "list"
    data: list[WebhookEventType]


class BridgeWebhookDeliveryError(ContractModel):
    """Why the last attempt failed: a stable code (docs/webhooks.md) and a short message."""

    code: StrictStr
    message: StrictStr | None = None


class BridgeWebhookDelivery(ContractModel):
    """One event owed to one endpoint. ``id`` is the ``webhook-id`` header of every attempt.

    Times are Unix seconds; ``expires_at`` is when retrying stops (the retry period)."""

    id: StrictStr
    object: Literal["webhook_delivery"] = "webhook_delivery"
    event_id: StrictStr
    event_type: WebhookEventType
    endpoint_id: StrictStr
    key_id: StrictStr | None = None
    status: DeliveryState
    attempts: U32
    created_at: U64
    next_attempt_at: U64 | None = None
    """When the next attempt is due (``pending``); ``null`` once finished."""
    last_attempt_at: U64 | None = None
    completed_at: U64 | None = None
    expires_at: U64
    last_response_status: U16 | None = None
    last_error: BridgeWebhookDeliveryError | None = None


class BridgeWebhookDeliveryList(ContractModel):
    """A page of deliveries, newest first (``?after=&limit=`` and filters)."""

    object: Literal["list"] = "list"
    data: list[BridgeWebhookDelivery]
    first_id: StrictStr | None = None
    last_id: StrictStr | None = None
    has_more: StrictBool
