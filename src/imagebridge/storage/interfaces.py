"""Storage interfaces: plain records and the async protocols every backend implements.

The stores speak JSON-ready data (``dict`` or JSON text) rather than contract models, so a
backend never depends on pydantic and the job manager owns the conversion. SQLite is the
embedded implementation; a PostgreSQL backend implements the same protocols.
"""

from __future__ import annotations

import builtins
import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeAlias, runtime_checkable

from imagebridge.contract.enums import ImageJobStatus

__all__ = [
    "ACTIVE_ROW_RESERVE_BYTES",
    "DEFAULT_BUSY_TIMEOUT_MS",
    "DEFAULT_PAGE_LIMIT",
    "LEGACY_SCOPE",
    "MAX_ERROR_JSON_BYTES",
    "MAX_PAGE_LIMIT",
    "MAX_PRESET_TEMPLATE_BYTES",
    "MAX_RESULT_JSON_BYTES",
    "ROW_OVERHEAD_BYTES",
    "CreateResult",
    "JobEvent",
    "JobEventKind",
    "JobIdentity",
    "JobPage",
    "JobRecord",
    "JobStatistics",
    "JobStore",
    "JobSummary",
    "JobVisibility",
    "JsonInput",
    "LeaseRenewal",
    "PresetPage",
    "PresetRecord",
    "PresetStore",
    "SchemaStatus",
    "SessionStore",
    "SharedJobStore",
]

ACTIVE_ROW_RESERVE_BYTES = 262_144
"""Logical bytes charged to a queued or running job: room for its future result.

With :data:`ROW_OVERHEAD_BYTES` this is a fixed unit of the on-disk accounting (cached per
row), not a tunable: a budget is tuned through ``max_database_bytes`` instead.
"""

ROW_OVERHEAD_BYTES = 128
"""Logical bytes charged to every job row on top of its text columns."""

MAX_RESULT_JSON_BYTES = ACTIVE_ROW_RESERVE_BYTES
"""Largest stored job result (response JSON); a result must fit the reserve it was charged."""

MAX_ERROR_JSON_BYTES = ACTIVE_ROW_RESERVE_BYTES
"""Largest stored job error JSON; larger errors are replaced by a short ``internal`` one."""

MAX_PRESET_TEMPLATE_BYTES = 262_144
"""Largest stored preset template JSON."""

DEFAULT_BUSY_TIMEOUT_MS = 5_000
DEFAULT_PAGE_LIMIT = 20
MAX_PAGE_LIMIT = 100

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


class JobVisibility(StrEnum):
    """Which history rows a listing shows: soft-deleted rows are ``hidden``."""

    ACTIVE = "active"
    HIDDEN = "hidden"
    ALL = "all"


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


@runtime_checkable
class JobStore(Protocol):
    """Durable job rows. Every caller operation is filtered by auth scope.

    Timestamps are Unix seconds given by the caller; a row's timestamps never move backwards
    even if the caller's clock does.
    """

    @property
    def max_result_bytes(self) -> int:
        """Largest response JSON :meth:`succeed` accepts; trim a result to fit and retry."""
        ...

    async def create(
        self,
        scope: str,
        job_id: str,
        request_json: JsonInput,
        prompt: str,
        *,
        submission_key: str | None = None,
        fingerprint: str | None = None,
        now: int,
        max_pending: int,
        max_database_bytes: int,
    ) -> CreateResult: ...

    async def claim(self, scope: str, job_id: str, *, now: int) -> bool: ...

    async def progress(
        self, scope: str, job_id: str, *, stage: str, partial_images: int, now: int
    ) -> bool: ...

    async def succeed(
        self, scope: str, job_id: str, response_json: JsonInput, *, now: int
    ) -> JobRecord: ...

    async def fail(
        self,
        scope: str,
        job_id: str,
        status: ImageJobStatus | str,
        error_json: JsonInput,
        *,
        now: int,
    ) -> JobRecord: ...

    async def request_cancel(self, scope: str, job_id: str, *, now: int) -> JobRecord: ...

    async def recover_interrupted(self, *, now: int) -> int: ...

    async def queued_identities(
        self, limit: int, *, after: JobIdentity | None = None
    ) -> builtins.list[JobIdentity]: ...

    async def get(self, scope: str, job_id: str) -> JobRecord: ...

    async def list(
        self,
        scope: str,
        *,
        visibility: JobVisibility | str = JobVisibility.ACTIVE,
        status: ImageJobStatus | str | None = None,
        favorite: bool | None = None,
        search: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
    ) -> JobPage: ...

    async def update_history(
        self,
        scope: str,
        job_id: str,
        *,
        favorite: bool | None = None,
        deleted: bool | None = None,
        now: int,
    ) -> JobRecord: ...

    async def prune(
        self, *, now: int, retention_secs: int, max_retained: int, max_retained_bytes: int
    ) -> int: ...

    async def statistics(self) -> JobStatistics: ...

    async def healthy(self) -> bool: ...

    async def close(self) -> None: ...


# -- the shared queue (several bridge instances on one store) ---------------------------------


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


@runtime_checkable
class SharedJobStore(JobStore, Protocol):
    """A job store several bridge instances can share as one queue.

    Each job records the provider its request routes to (``create(provider=...)``); an
    instance claims the oldest queued job for one of its providers with :meth:`claim_next`
    and holds it under a lease it renews with :meth:`heartbeat`. A running job whose lease
    ran out is marked ``interrupted`` by :meth:`expire_leases`, never run again, exactly like
    ``recover_interrupted`` does at a single instance's restart. :meth:`queued_by_provider`
    counts queued jobs per route (unrouted jobs, which any instance may claim, under
    ``"*"``). Notifications (:meth:`notify_job_event`, :meth:`subscribe`) only wake
    instances early; the durable rows (``cancel_requested``, statuses, leases) stay the
    source of truth.
    """

    async def create(
        self,
        scope: str,
        job_id: str,
        request_json: JsonInput,
        prompt: str,
        *,
        submission_key: str | None = None,
        fingerprint: str | None = None,
        now: int,
        max_pending: int,
        max_database_bytes: int,
        provider: str | None = None,
    ) -> CreateResult: ...

    async def claim_next(
        self, instance_id: str, providers: Sequence[str], *, now: int, lease_secs: int
    ) -> JobRecord | None: ...

    async def heartbeat(
        self, instance_id: str, job_ids: Sequence[str], *, now: int, lease_secs: int
    ) -> LeaseRenewal: ...

    async def expire_leases(self, *, now: int) -> int: ...

    async def instance_counts(self) -> dict[str, int]: ...

    async def queued_by_provider(self) -> dict[str, int]: ...

    async def notify_job_event(self, kind: JobEventKind | str, job_id: str) -> None: ...

    def subscribe(self) -> contextlib.AbstractAsyncContextManager[AsyncIterator[JobEvent]]: ...


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


@runtime_checkable
class PresetStore(Protocol):
    """Named request templates; global, not scoped by bearer."""

    async def create(
        self, name: str, *, description: str | None, template_json: JsonInput, now: int
    ) -> PresetRecord: ...

    async def get(self, name: str) -> PresetRecord: ...

    async def replace(
        self, name: str, *, description: str | None, template_json: JsonInput, now: int
    ) -> PresetRecord: ...

    async def delete(self, name: str) -> None: ...

    async def list(
        self, *, cursor: str | None = None, limit: int = DEFAULT_PAGE_LIMIT
    ) -> PresetPage: ...

    async def close(self) -> None: ...


# -- sessions --------------------------------------------------------------------------------


@runtime_checkable
class SessionStore(Protocol):
    """Persistent session key → provider thread bindings, namespaced by provider name."""

    @property
    def provider(self) -> str: ...

    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, thread_id: str, *, now: int | None = None) -> None: ...

    async def delete(self, key: str) -> bool: ...

    async def close(self) -> None: ...


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
