"""The webhook outbox's rules, backend-neutral: events, their payloads, who receives them.

An *event* is one thing that happened (a job finished, a background response completed),
written once to the outbox with the exact JSON body every receiver gets. A *delivery* is
that event owed to one endpoint: it carries the ``webhook-id`` (the same on every attempt),
its state and its attempts. Both are written in the transaction of the state change that
causes them (:func:`plan_outbox`), so an event exists exactly when its cause committed.

Payloads follow OpenAI's webhook events: ``{"id", "object": "event", "created_at", "type",
"data": {"id", …}}``. OpenAI's own ``response.*`` events carry ``data.id`` only; the
bridge's ``job.*`` events add the job's ``status`` and ``error_code`` (never images, prompts
or error messages). Nothing here opens a connection: each backend runs the statements.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.webhooks import (
    ALL_EVENT_TYPES,
    DELIVERY_STATES,
    JOB_EVENT_TYPES,
    RESPONSE_EVENT_TYPES,
)
from imagebridge.imaging.ids import uuid7
from imagebridge.storage.records import (
    OutboxEvent,
    WebhookDeliveryRecord,
    WebhookEndpointRecord,
)
from imagebridge.storage.rules.keys import key_id_of_scope
from imagebridge.storage.rules.values import (
    check_timestamp,
    has_control_characters,
    utf8_size,
)

__all__ = [
    "ALL_EVENT_TYPES",
    "DELIVERY_STATES",
    "FINISHED_STATES",
    "JOB_EVENT_TYPES",
    "MAX_ENDPOINT_NAME_BYTES",
    "MAX_URL_BYTES",
    "RESPONSE_EVENT_TYPES",
    "UNFINISHED_STATES",
    "OutboxLimits",
    "Statement",
    "check_endpoint_id",
    "check_endpoint_name",
    "check_event_types",
    "delivery_not_found",
    "endpoint_not_found",
    "event_payload",
    "job_event",
    "load_event_types",
    "mint_delivery_id",
    "mint_endpoint_id",
    "mint_event_id",
    "plan_outbox",
    "receives",
    "response_event",
]

Statement = tuple[str, Mapping[str, Any]]
"""One SQL statement with ``:name`` placeholders and its parameters."""


PENDING, DELIVERING, DELIVERED, FAILED = DELIVERY_STATES
UNFINISHED_STATES = (PENDING, DELIVERING)
FINISHED_STATES = (DELIVERED, FAILED)
UNFINISHED_SQL = "('pending', 'delivering')"
FINISHED_SQL = "('delivered', 'failed')"

OUTBOX_FULL = "webhook_outbox_full"
"""``last_error.code`` of a delivery refused because the outbox held its bound already."""
ENDPOINT_DELETED = "webhook_endpoint_deleted"
"""``last_error.code`` of a delivery whose endpoint was deleted before it went out."""

MAX_URL_BYTES = 2048
MAX_ENDPOINT_NAME_BYTES = 128
MAX_ERROR_CODE_CHARS = 64
MAX_SOURCE_BYTES = 256
_ID = re.compile(r"[a-z]{2,5}_[A-Za-z0-9_.-]{1,120}")


@dataclass(frozen=True, slots=True)
class OutboxLimits:
    """What writing to the outbox needs to know: how long a delivery may be retried and
    how many undelivered deliveries the outbox holds before new ones are refused."""

    retry_period_ms: int
    max_pending: int


# -- ids and checks ----------------------------------------------------------------------


def mint_event_id() -> str:
    return "evt_" + uuid7().hex


def mint_delivery_id() -> str:
    """The ``webhook-id`` of one event to one endpoint (kept on every attempt)."""
    return "wh_" + uuid7().hex


def mint_endpoint_id() -> str:
    return "whep_" + uuid7().hex


def endpoint_not_found() -> BridgeError:
    return BridgeError(
        ErrorCode.INVALID_REQUEST,
        "webhook endpoint was not found",
        details={"resource": "webhook_endpoint"},
    )


def delivery_not_found() -> BridgeError:
    return BridgeError(
        ErrorCode.INVALID_REQUEST,
        "webhook delivery was not found",
        details={"resource": "webhook_delivery"},
    )


def check_endpoint_id(value: object) -> str:
    """A malformed id is simply not found."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise endpoint_not_found()
    return value


def check_endpoint_name(value: object, field: str = "name") -> str:
    size = utf8_size(value) if isinstance(value, str) else None
    if (
        not isinstance(value, str)
        or not value.strip()
        or size is None
        or size > MAX_ENDPOINT_NAME_BYTES
        or has_control_characters(value)
    ):
        raise BridgeError.invalid_request(
            f"webhook endpoint name must be 1 to {MAX_ENDPOINT_NAME_BYTES} bytes of text",
            field=field,
        )
    return value


def check_event_types(value: object, field: str = "event_types") -> tuple[str, ...]:
    """A non-empty list of known event types, deduplicated in the canonical order."""
    if not isinstance(value, list | tuple) or not value:
        raise BridgeError.invalid_request(
            "event_types must be a non-empty list of event types", field=field
        )
    for index, item in enumerate(value):
        if item not in ALL_EVENT_TYPES:
            raise BridgeError.invalid_request(
                f"unknown webhook event type; expected one of: {', '.join(ALL_EVENT_TYPES)}",
                field=f"{field}[{index}]",
            )
    return tuple(kind for kind in ALL_EVENT_TYPES if kind in value)


def load_event_types(text: str) -> tuple[str, ...]:
    value = json.loads(text)
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def dump_event_types(types: Sequence[str]) -> str:
    return json.dumps(list(types), separators=(",", ":"))


# -- events --------------------------------------------------------------------------------


def event_payload(event_id: str, event: OutboxEvent) -> str:
    """The exact body every receiver of ``event`` gets, on every attempt (compact JSON)."""
    document = {
        "id": event_id,
        "object": "event",
        "created_at": event.created_at,
        "type": event.type,
        "data": dict(event.data),
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _error_code(error_json: str | None) -> str | None:
    if not error_json:
        return None
    try:
        error = json.loads(error_json)
    except ValueError:
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return code[:MAX_ERROR_CODE_CHARS] if isinstance(code, str) and code else None


def job_event(row: Mapping[str, Any]) -> OutboxEvent | None:
    """The event of a job row that just reached its final status (``None`` otherwise).

    ``row`` holds ``id``, ``auth_scope``, ``status``, ``error_json`` and ``completed_at``.
    A key's job (scope ``key:<id>``) goes to that key's endpoints and the admin's.
    """
    status = str(row["status"])
    kind = f"job.{status}"
    if kind not in JOB_EVENT_TYPES:
        return None
    created = row.get("completed_at")
    return OutboxEvent(
        type=kind,
        data={
            "id": str(row["id"]),
            "status": status,
            "error_code": None if status == "succeeded" else _error_code(row.get("error_json")),
        },
        key_id=key_id_of_scope(str(row["auth_scope"])),
        source=f"job:{row['id']}",
        created_at=int(created) if created is not None else 0,
    )


_RESPONSE_EVENTS = {
    "succeeded": "response.completed",
    "failed": "response.failed",
    "interrupted": "response.failed",
    "cancelled": "response.cancelled",
}
"""A background response's job status → its OpenAI event (an interrupted job is a failed
response: docs/api-decisions.md, "Responses", the restart rule)."""


def response_event(row: Mapping[str, Any]) -> OutboxEvent | None:
    """The OpenAI event of a background response whose job just reached its final status:
    ``data`` is ``{"id": "resp_…"}``, as OpenAI sends it. ``row`` is :func:`job_event`'s
    with ``response_id``."""
    kind = _RESPONSE_EVENTS.get(str(row["status"]))
    if kind is None:
        return None
    response_id = str(row["response_id"])
    created = row.get("completed_at")
    return OutboxEvent(
        type=kind,
        data={"id": response_id},
        key_id=key_id_of_scope(str(row["auth_scope"])),
        source=f"response:{response_id}",
        created_at=int(created) if created is not None else 0,
    )


def receives(endpoint: Mapping[str, Any], event: OutboxEvent) -> bool:
    """Whether an endpoint row (``event_types``, ``key_id``) receives ``event``: its types
    include the event's, and an endpoint of a key gets only that key's events."""
    if event.type not in load_event_types(str(endpoint["event_types"])):
        return False
    owner = endpoint.get("key_id")
    return owner is None or owner == event.key_id


def _check_event(event: OutboxEvent, max_payload_bytes: int | None) -> str:
    if event.type not in ALL_EVENT_TYPES:
        raise BridgeError.invalid_request("unknown webhook event type", field="type")
    check_timestamp(event.created_at, "created_at")
    data_id = event.data.get("id")
    if not isinstance(data_id, str) or not data_id:
        raise BridgeError.invalid_request("webhook event data needs an id", field="data.id")
    if event.source is not None and (utf8_size(event.source) or MAX_SOURCE_BYTES + 1) > (
        MAX_SOURCE_BYTES
    ):
        raise BridgeError.invalid_request("webhook event source is too long", field="source")
    payload = event_payload("evt_" + "0" * 32, event)
    if max_payload_bytes is not None and len(payload.encode()) > max_payload_bytes:
        raise BridgeError.invalid_request(
            "webhook event payload exceeds server.webhooks.max_payload_bytes",
            field="data",
            max_payload_bytes=max_payload_bytes,
        )
    return payload


def plan_outbox(
    events: Iterable[OutboxEvent],
    endpoints: Sequence[Mapping[str, Any]],
    *,
    tables: Mapping[str, str],
    pending: int,
    now_ms: int,
    limits: OutboxLimits,
    max_payload_bytes: int | None = None,
) -> tuple[list[Statement], list[str]]:
    """The statements writing ``events`` and their deliveries, and the new event ids.

    An event no endpoint receives is not written. An event whose ``source`` is already in
    the outbox is written once only: its insert does nothing and its deliveries are
    inserted only where their event row exists (``WHERE EXISTS``), so a repeated emit
    invents nothing. Deliveries past ``limits.max_pending`` undelivered ones are written
    ``failed`` (``webhook_outbox_full``), visible to the admin, instead of being dropped.
    """
    statements: list[Statement] = []
    written: list[str] = []
    for event in events:
        _check_event(event, max_payload_bytes)
        targets = [endpoint for endpoint in endpoints if receives(endpoint, event)]
        if not targets:
            continue
        event_id = mint_event_id()
        statements.append(
            (
                f"INSERT INTO {tables['events']} (id, type, created_at, key_id, source, "  # noqa: S608
                "payload) VALUES (:id, :type, :created_at, :key_id, :source, :payload) "
                "ON CONFLICT DO NOTHING",
                {
                    "id": event_id,
                    "type": event.type,
                    "created_at": event.created_at,
                    "key_id": event.key_id,
                    "source": event.source,
                    "payload": event_payload(event_id, event),
                },
            )
        )
        for endpoint in targets:
            full = pending >= limits.max_pending
            pending += 0 if full else 1
            statements.append(
                (
                    f"INSERT INTO {tables['deliveries']} (id, event_id, event_type, "  # noqa: S608
                    "endpoint_id, key_id, status, attempts, created_at, next_attempt_at, "
                    "deadline_at, completed_at, last_error_code, last_error) "
                    "SELECT :id, :event_id, :event_type, :endpoint_id, CAST(:key_id AS TEXT), "
                    ":status, 0, :now, :now, :deadline, CAST(:completed AS BIGINT), "
                    "CAST(:code AS TEXT), CAST(:message AS TEXT) "
                    f"WHERE EXISTS (SELECT 1 FROM {tables['events']} WHERE id = :event_id)",
                    {
                        "id": mint_delivery_id(),
                        "event_id": event_id,
                        "event_type": event.type,
                        "endpoint_id": str(endpoint["id"]),
                        "key_id": event.key_id,
                        "status": FAILED if full else PENDING,
                        "now": now_ms,
                        "deadline": now_ms + limits.retry_period_ms,
                        "completed": now_ms if full else None,
                        "code": OUTBOX_FULL if full else None,
                        "message": "the webhook outbox was full" if full else None,
                    },
                )
            )
        written.append(event_id)
    return statements, written


# -- rows ------------------------------------------------------------------------------------


def endpoint_record(row: Mapping[str, Any]) -> WebhookEndpointRecord:
    return WebhookEndpointRecord(
        id=str(row["id"]),
        name=str(row["name"]),
        url=str(row["url"]),
        event_types=load_event_types(str(row["event_types"])),
        key_id=row["key_id"],
        source=str(row["source"]),
        secret_env=row["secret_env"],
        secret_hint=row["secret_hint"],
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
    )


def delivery_record(row: Mapping[str, Any]) -> WebhookDeliveryRecord:
    return WebhookDeliveryRecord(
        id=str(row["id"]),
        event_id=str(row["event_id"]),
        event_type=str(row["event_type"]),
        endpoint_id=str(row["endpoint_id"]),
        key_id=row["key_id"],
        status=str(row["status"]),
        attempts=int(row["attempts"]),
        created_at=int(row["created_at"]),
        next_attempt_at=int(row["next_attempt_at"]),
        deadline_at=int(row["deadline_at"]),
        last_attempt_at=row["last_attempt_at"],
        completed_at=row["completed_at"],
        last_status=row["last_status"],
        last_error_code=row["last_error_code"],
        last_error=row["last_error"],
    )
