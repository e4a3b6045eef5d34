"""The plain records the stores take and return: JSON-ready data, no behaviour of a backend.

Stores speak JSON-ready data (``dict`` or JSON text) rather than contract models, so a backend
never depends on pydantic and the job manager owns the conversion. The protocols these records
travel through are in :mod:`imagebridge.storage.interfaces`; how a database row becomes one of
them is in :mod:`imagebridge.storage.rows`.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeAlias

from imagebridge.contract.enums import ImageJobStatus

__all__ = [
    "LEGACY_SCOPE",
    "CreateResult",
    "JobEvent",
    "JobEventKind",
    "JobIdentity",
    "JobOrigin",
    "JobPage",
    "JobRecord",
    "JobStatistics",
    "JobSummary",
    "JobVisibility",
    "JsonInput",
    "KeyAuditEntry",
    "KeyLimits",
    "KeyRecord",
    "KeyUsage",
    "LeaseRenewal",
    "OutboxEvent",
    "OutboxStatistics",
    "PresetPage",
    "PresetRecord",
    "ResponseRecord",
    "SchemaStatus",
    "WebhookDeliveryPage",
    "WebhookDeliveryRecord",
    "WebhookEndpointRecord",
    "WebhookSecrets",
    "WebhookTarget",
]

LEGACY_SCOPE = "legacy-unowned"
"""Ownership scope of jobs written before scopes existed (schema v1/v2)."""

JsonInput: TypeAlias = Mapping[str, Any] | str
"""A JSON object given either as a mapping or as JSON text."""


def _load_object(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    value = json.loads(text)
    if not isinstance(value, dict):  # pragma: no cover - the stores only write objects
        raise ValueError("stored JSON is not an object")
    return value


# -- jobs ------------------------------------------------------------------------------------


class JobOrigin(StrEnum):
    """Which surface started a history record: a durable job, or a synchronous request that
    ran in-process on ``POST /v1/images`` (``sync``), ``/v1/images/stream`` (``stream``) or
    an OpenAI-compatible route (``openai``, streamed or not)."""

    JOB = "job"
    SYNC = "sync"
    STREAM = "stream"
    OPENAI = "openai"


class JobVisibility(StrEnum):
    """Which history rows a listing shows: soft-deleted rows are ``hidden``."""

    ACTIVE = "active"
    HIDDEN = "hidden"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    """A kept OpenAI response: its ids, its owner, the history record (``job_id``) that
    holds its work and outcome, and its shape (what it repeats of its request, JSON)."""

    id: str
    auth_scope: str
    job_id: str
    call_id: str
    message_id: str
    background: bool
    created_at: int
    shape_json: str
    deleted_at: int | None = None


@dataclass(frozen=True, slots=True)
class JobSummary:
    """List-safe job state: no request, result or error bodies."""

    id: str
    status: ImageJobStatus
    created_at: int
    updated_at: int
    started_at: int | None
    completed_at: int | None
    progress_stage: str | None
    partial_images: int
    cancel_requested: bool
    favorite: bool
    deleted_at: int | None

    @property
    def terminal(self) -> bool:
        return self.status.terminal


@dataclass(frozen=True, slots=True)
class JobRecord:
    """Every column of one durable job row; JSON columns are kept as stored text.

    Parsing is left to the caller (:meth:`request`, :meth:`response`, :meth:`error`) because a
    request can carry large inline images: parse it off the event loop when that matters.
    """

    id: str
    auth_scope: str
    status: ImageJobStatus
    created_at: int
    updated_at: int
    started_at: int | None
    completed_at: int | None
    request_json: str
    prompt_search: str
    progress_stage: str | None
    partial_images: int
    response_json: str | None
    error_json: str | None
    cancel_requested: bool
    favorite: bool
    deleted_at: int | None
    submission_key_hash: str | None
    request_fingerprint: str | None
    logical_bytes: int
    provider: str | None = field(default=None, compare=False)
    """The provider the shared queue routed the job to, on the record
    :meth:`SharedJobStore.claim_next` returns (``None`` elsewhere, and for unrouted jobs)."""
    origin: JobOrigin = JobOrigin.JOB
    """The surface that started it: a queued job, or a synchronous request's record."""

    @property
    def terminal(self) -> bool:
        return self.status.terminal

    def request(self) -> dict[str, Any]:
        """The stored request (never holds an idempotency key)."""
        value = _load_object(self.request_json)
        assert value is not None
        return value

    def response(self) -> dict[str, Any] | None:
        return _load_object(self.response_json)

    def error(self) -> dict[str, Any] | None:
        """The raw ``BridgeError`` shape of a failed, cancelled or interrupted job."""
        return _load_object(self.error_json)

    def summary(self) -> JobSummary:
        return JobSummary(
            id=self.id,
            status=self.status,
            created_at=self.created_at,
            updated_at=self.updated_at,
            started_at=self.started_at,
            completed_at=self.completed_at,
            progress_stage=self.progress_stage,
            partial_images=self.partial_images,
            cancel_requested=self.cancel_requested,
            favorite=self.favorite,
            deleted_at=self.deleted_at,
        )


@dataclass(frozen=True, slots=True)
class CreateResult:
    """Outcome of a submission: ``created`` is false when an idempotent replay matched."""

    job: JobRecord
    created: bool


@dataclass(frozen=True, slots=True)
class JobPage:
    items: builtins.list[JobSummary]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class JobIdentity:
    """Where a queued job lives: its owner scope, id and creation time (the queue order)."""

    auth_scope: str
    id: str
    created_at: int


@dataclass(frozen=True, slots=True)
class JobStatistics:
    total: int
    queued: int
    running: int
    succeeded: int
    failed: int
    cancelled: int
    interrupted: int
    hidden: int
    database_bytes: int
    logical_bytes: int


# -- the shared queue (several bridge instances on one store) --------------------------------


class JobEventKind(StrEnum):
    """What a job notification announces to the other instances sharing a store."""

    QUEUED = "queued"
    """New work exists: idle instances should call ``claim_next``."""
    CANCEL_REQUESTED = "cancel_requested"
    """The instance running the job should cancel it (the flag itself is durable)."""
    PROGRESS = "progress"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One notification: a hint to look at the durable row, never a source of truth."""

    kind: JobEventKind
    job_id: str


@dataclass(frozen=True, slots=True)
class LeaseRenewal:
    """What a heartbeat found: leases it extended, and which of those jobs should stop.

    A job the caller asked about that is not in ``renewed`` is no longer this instance's
    (finished, or its lease expired and it was marked interrupted): stop working on it.
    """

    renewed: frozenset[str]
    cancel_requested: frozenset[str]


# -- presets ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PresetRecord:
    name: str
    description: str | None
    template_json: str
    created_at: int
    updated_at: int

    def template(self) -> dict[str, Any]:
        value = _load_object(self.template_json)
        assert value is not None
        return value


@dataclass(frozen=True, slots=True)
class PresetPage:
    items: builtins.list[PresetRecord]
    next_cursor: str | None


# -- schema inspection -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """What a read-only look at a database file found (for ``doctor`` and ``setup``)."""

    initialized: bool
    version: int | None
    current_version: int

    @property
    def current(self) -> bool:
        return self.version == self.current_version

    def to_dict(self) -> dict[str, Any]:
        return {
            "initialized": self.initialized,
            "version": self.version,
            "current_version": self.current_version,
        }


# -- API keys --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyLimits:
    """What a key may do: images per window, concurrent requests, providers, expiry."""

    images_per_day: int | None = None
    images_per_week: int | None = None
    images_per_month: int | None = None
    max_concurrent: int | None = None
    providers: tuple[str, ...] | None = None
    expires_at: int | None = None

    def window_limit(self, window: str) -> int | None:
        value: int | None = getattr(self, f"images_per_{window}")
        return value

    def to_dict(self) -> dict[str, Any]:
        return {
            "images_per_day": self.images_per_day,
            "images_per_week": self.images_per_week,
            "images_per_month": self.images_per_month,
            "max_concurrent": self.max_concurrent,
            "providers": None if self.providers is None else list(self.providers),
            "expires_at": self.expires_at,
        }


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One API key as stored: never its secret, nor its hash (only a display prefix).

    ``used`` holds each window's counter with the period start it belongs to; a counter of
    an earlier period counts as zero (:meth:`used_in`).
    """

    id: str
    name: str
    prefix: str
    created_at: int
    updated_at: int
    revoked_at: int | None
    limits: KeyLimits
    used: Mapping[str, tuple[int, int]]
    """``window → (period start, images reserved in it)``."""

    def used_in(self, window: str, period_start: int) -> int:
        start, count = self.used.get(window, (0, 0))
        return count if start >= period_start else 0

    def active(self, now: int) -> bool:
        expires = self.limits.expires_at
        return self.revoked_at is None and (expires is None or expires > now)

    def state(self, now: int) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if not self.active(now):
            return "expired"
        return "active"


@dataclass(frozen=True, slots=True)
class KeyUsage:
    """Images one key asked for on one local day, on one provider and pool account."""

    key_id: str
    day: str
    provider: str
    account: str
    requested: int
    delivered: int
    failed: int
    unknown: int
    total_tokens: int = 0
    """The providers' own usage numbers (``usage.total_tokens``), summed."""
    kept: int = 0
    """Of ``delivered``: images finished and kept in the history after their caller had
    gone (a synchronous request whose client disconnected once the provider ran)."""
    replayed: int = 0
    """Images answered again to a retry that joined an earlier generation: not asked for
    again and not counted in ``requested`` or ``delivered`` (nothing was generated)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "day": self.day,
            "provider": self.provider,
            "account": self.account,
            "requested": self.requested,
            "delivered": self.delivered,
            "failed": self.failed,
            "unknown": self.unknown,
            "total_tokens": self.total_tokens,
            "kept": self.kept,
            "replayed": self.replayed,
        }


@dataclass(frozen=True, slots=True)
class KeyAuditEntry:
    """One key administration action: who, what, when (never a secret)."""

    seq: int
    at: int
    actor: str
    action: str
    key_id: str
    key_name: str
    details: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": self.at,
            "actor": self.actor,
            "action": self.action,
            "key_id": self.key_id,
            "key_name": self.key_name,
            "details": self.details,
        }


# -- webhooks --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    """One event to write to the webhook outbox (its id is minted when it is written).

    ``data`` is the payload's ``data`` object (``data.id`` required); ``key_id`` is the key
    whose endpoints receive it besides the admin's (``None``: the admin's alone);
    ``source`` makes writing idempotent: a second event with the same source is not
    written (``job:<id>``, ``response:<id>:<type>``).
    """

    type: str
    data: Mapping[str, Any]
    key_id: str | None
    source: str | None
    created_at: int


@dataclass(frozen=True, slots=True)
class WebhookEndpointRecord:
    """One receiver of events, never with its secret (``secret_hint`` shows its end)."""

    id: str
    name: str
    url: str
    event_types: tuple[str, ...]
    key_id: str | None
    source: str
    """``api`` (made through the admin API) or ``config`` (``[server.webhooks.endpoints]``)."""
    secret_env: str | None
    secret_hint: str | None
    created_at: int
    updated_at: int


@dataclass(frozen=True, slots=True)
class WebhookSecrets:
    """What signs an endpoint's deliveries: its secret (or the variable naming it) and,
    during a rotation's overlap, the previous secret until ``previous_expires_at`` (ms)."""

    secret: str | None
    secret_env: str | None
    previous: str | None = None
    previous_expires_at: int | None = None


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    """A delivery claimed for one attempt: where it goes, what it carries, how it is signed.

    ``url`` is ``None`` when the endpoint was deleted after the delivery was claimed."""

    id: str
    event_id: str
    endpoint_id: str
    attempts: int
    created_at: int
    deadline_at: int
    payload: str
    url: str | None
    secrets: WebhookSecrets


@dataclass(frozen=True, slots=True)
class WebhookDeliveryRecord:
    """One event owed to one endpoint: its ``webhook-id`` (``id``), state and attempts.

    Times are Unix milliseconds; ``last_error_code`` is a stable code
    (``webhook_target_private``, ``webhook_timeout``, ``webhook_http_status`` …)."""

    id: str
    event_id: str
    event_type: str
    endpoint_id: str
    key_id: str | None
    status: str
    attempts: int
    created_at: int
    next_attempt_at: int
    deadline_at: int
    last_attempt_at: int | None
    completed_at: int | None
    last_status: int | None
    last_error_code: str | None
    last_error: str | None


@dataclass(frozen=True, slots=True)
class WebhookDeliveryPage:
    data: builtins.list[WebhookDeliveryRecord]
    has_more: bool


@dataclass(frozen=True, slots=True)
class OutboxStatistics:
    """Undelivered deliveries and when the oldest of them was written (ms), for metrics."""

    pending: int
    oldest_created_at: int | None
