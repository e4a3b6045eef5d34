"""Writing the webhook outbox: events and their deliveries, as conversations either backend runs.

A *conversation* (:data:`Conversation`) is a generator that yields statements (``:name``
placeholders) and is sent each one's rows back, so logic that reads, decides and writes runs
inside ONE transaction on either backend (the pattern of
:class:`~imagebridge.storage.webhook_store.WebhookStoreBase` and
:mod:`imagebridge.storage.response_store`). The job stores drive :func:`job_outbox` inside
their own transaction when a job reaches its final status, which is how an event is written
exactly when its cause commits; this module is apart from the store's endpoint and delivery
operations because both the store and each backend's job-store hook use it.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from imagebridge.storage.records import OutboxEvent
from imagebridge.storage.rules.webhooks import (
    UNFINISHED_SQL,
    OutboxLimits,
    Statement,
    job_event,
    plan_outbox,
    response_event,
)

__all__ = ["Conversation", "WebhookTables", "job_outbox", "write_outbox"]

T = TypeVar("T")
Conversation = Generator[Statement, list[dict[str, Any]], T]
"""Yields statements, is sent each one's rows, returns its result (one transaction)."""


@dataclass(frozen=True, slots=True)
class WebhookTables:
    """The outbox's table names (PostgreSQL: qualified with the schema) and the jobs table
    a job's final status is read from."""

    events: str = "webhook_events"
    deliveries: str = "webhook_deliveries"
    endpoints: str = "webhook_endpoints"
    jobs: str = "image_jobs"
    responses: str = "openai_responses"

    def names(self) -> dict[str, str]:
        return {"events": self.events, "deliveries": self.deliveries}


def write_outbox(
    tables: WebhookTables,
    events: Sequence[OutboxEvent],
    *,
    limits: OutboxLimits,
    now_ms: int,
    max_payload_bytes: int | None = None,
) -> Conversation[list[str]]:
    """Write ``events`` and their deliveries (see :func:`plan_outbox`); the new event ids."""
    if not events:
        return []
    endpoints = yield (f"SELECT id, event_types, key_id FROM {tables.endpoints}", {})  # noqa: S608
    if not endpoints:
        return []
    counted = yield (
        f"SELECT COUNT(*) AS n FROM {tables.deliveries} WHERE status IN {UNFINISHED_SQL}",  # noqa: S608
        {},
    )
    statements, written = plan_outbox(
        events,
        endpoints,
        tables=tables.names(),
        pending=int(counted[0]["n"]),
        now_ms=now_ms,
        limits=limits,
        max_payload_bytes=max_payload_bytes,
    )
    for statement in statements:  # noqa: UP028 - rows are sent back, a list cannot take them
        yield statement
    return written


def job_outbox(
    tables: WebhookTables, job_ids: Sequence[str], *, limits: OutboxLimits, now_ms: int
) -> Conversation[list[str]]:
    """The ``job.*`` events of jobs that just reached their final status, written in the
    transaction that recorded it (the job stores drive this). A job that runs a background
    OpenAI response sends that response's ``response.*`` event instead. Synchronous
    requests' records share the table and send none: their callers were answered, or chose
    to leave."""
    events: list[OutboxEvent] = []
    for start in range(0, len(job_ids), 500):
        names = {f"j{i}": job_id for i, job_id in enumerate(job_ids[start : start + 500])}
        rows = yield (
            "SELECT j.id, j.auth_scope, j.status, j.error_json, j.completed_at, "  # noqa: S608
            f"r.id AS response_id FROM {tables.jobs} AS j "
            f"LEFT JOIN {tables.responses} AS r ON r.job_id = j.id WHERE j.origin = 'job' "
            f"AND j.id IN ({', '.join(f':{name}' for name in names)})",
            names,
        )
        for row in rows:
            event = job_event(row) if row["response_id"] is None else response_event(row)
            if event is not None:
                events.append(event)
    return (yield from write_outbox(tables, events, limits=limits, now_ms=now_ms))
