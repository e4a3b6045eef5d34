"""Storage interfaces: the async protocols every backend implements.

The stores speak JSON-ready data (``dict`` or JSON text, and the plain records of
:mod:`imagebridge.storage.records`) rather than contract models, so a backend never depends
on pydantic and the job manager owns the conversion. SQLite is the embedded implementation;
a PostgreSQL backend implements the same protocols.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.engine.sessions import SessionBindings
from imagebridge.storage.records import (
    CreateResult,
    JobEvent,
    JobEventKind,
    JobIdentity,
    JobOrigin,
    JobPage,
    JobRecord,
    JobStatistics,
    JobVisibility,
    JsonInput,
    KeyAuditEntry,
    KeyLimits,
    KeyRecord,
    KeyUsage,
    LeaseRenewal,
    OutboxEvent,
    OutboxStatistics,
    PresetPage,
    PresetRecord,
    ResponseRecord,
    WebhookDeliveryPage,
    WebhookDeliveryRecord,
    WebhookEndpointRecord,
    WebhookSecrets,
    WebhookTarget,
)
from imagebridge.storage.rules.keys import Windows
from imagebridge.storage.rules.pages import DEFAULT_PAGE_LIMIT
from imagebridge.storage.rules.webhooks import OutboxLimits

if TYPE_CHECKING:
    from imagebridge.storage.webhook_store import EndpointWrite

__all__ = [
    "JobStore",
    "KeyStore",
    "PresetStore",
    "ResponseStore",
    "SessionStore",
    "SharedJobStore",
    "WebhookStore",
]

# -- jobs ------------------------------------------------------------------------------------


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

    async def open_record(
        self,
        scope: str,
        record_id: str,
        request_json: JsonInput,
        prompt: str,
        *,
        origin: JobOrigin | str,
        fingerprint: str,
        sync_key: str | None = None,
        now: int,
        lease: tuple[str, int] | None = None,
    ) -> CreateResult:
        """A synchronous request's record, ``running`` from the start (or the keyed
        record an earlier request made: ``created`` false)."""
        ...

    async def find_retry(
        self, scope: str, origin: JobOrigin | str, fingerprint: str, *, since: int
    ) -> JobRecord | None:
        """The newest record a marked retry without a key repeats, or ``None``."""
        ...

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
        forget_key: bool = False,
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
        origin: JobOrigin | str | None = None,
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


# -- the shared queue (several bridge instances on one store) --------------------------------


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


@runtime_checkable
class PresetStore(Protocol):
    """Named request templates, each of one owner: ``""`` for the shared ones, an API key's
    scope for a key's own; ``shared`` reads an owner's with the shared ones under them."""

    async def create(
        self,
        name: str,
        *,
        description: str | None,
        template_json: JsonInput,
        now: int,
        owner: str = "",
    ) -> PresetRecord: ...

    async def get(self, name: str, *, owner: str = "", shared: bool = False) -> PresetRecord: ...

    async def replace(
        self,
        name: str,
        *,
        description: str | None,
        template_json: JsonInput,
        now: int,
        owner: str = "",
    ) -> PresetRecord: ...

    async def delete(self, name: str, *, owner: str = "") -> None: ...

    async def list(
        self,
        *,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
        owner: str = "",
        shared: bool = False,
    ) -> PresetPage: ...

    async def close(self) -> None: ...


# -- sessions --------------------------------------------------------------------------------


@runtime_checkable
class SessionStore(SessionBindings, Protocol):
    """Persistent session key → provider thread bindings, namespaced by provider name.

    The engine's :class:`~imagebridge.engine.sessions.SessionBindings` port, as a store: one
    store instance serves one provider's namespace, and ``put`` may be given the time.
    """

    @property
    def provider(self) -> str: ...

    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, thread_id: str, *, now: int | None = None) -> None: ...

    async def delete(self, key: str) -> bool: ...

    async def close(self) -> None: ...


# -- API keys --------------------------------------------------------------------------------


@runtime_checkable
class KeyStore(Protocol):
    """Named API keys (hashes only), their quota counters, usage per day and audit trail.

    Lives in the jobs database. ``reserve`` is one conditional statement, exact under
    concurrency and across instances; ``None`` means refused.
    """

    async def create(
        self,
        name: str,
        limits: KeyLimits,
        *,
        secret_hash: str,
        prefix: str,
        actor: str,
        now: int | None = None,
    ) -> KeyRecord: ...

    async def get(self, key_id: str) -> KeyRecord: ...

    async def find_by_name(self, name: str) -> KeyRecord: ...

    async def find(self, secret_hash: str) -> tuple[KeyRecord, str] | None: ...

    async def list(self) -> builtins.list[KeyRecord]: ...

    async def update(
        self, key_id: str, values: Mapping[str, object], *, actor: str, now: int | None = None
    ) -> KeyRecord: ...

    async def revoke(self, key_id: str, *, actor: str, now: int | None = None) -> KeyRecord: ...

    async def rotate(
        self, key_id: str, *, secret_hash: str, prefix: str, actor: str, now: int | None = None
    ) -> KeyRecord: ...

    async def reserve(self, key_id: str, n: int, windows: Windows) -> KeyRecord | None: ...

    async def release(self, key_id: str, n: int, windows: Windows) -> KeyRecord | None: ...

    async def acquire_slot(
        self, key_id: str, slot_id: str, *, holder: str, now_ms: int, expires_ms: int
    ) -> bool: ...

    async def release_slot(self, key_id: str, slot_id: str) -> bool: ...

    async def renew_slots(self, slot_ids: Sequence[str], *, expires_ms: int) -> int: ...

    async def reclaim_slots(self, key_id: str, *, now_ms: int) -> int: ...

    async def record_usage(self, usage: KeyUsage) -> None: ...

    async def usage(
        self,
        *,
        key_id: str | None = None,
        provider: str | None = None,
        account: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = ...,
    ) -> builtins.list[KeyUsage]: ...

    async def audit(
        self, *, key_id: str | None = None, limit: int = ...
    ) -> builtins.list[KeyAuditEntry]: ...

    async def close(self) -> None: ...


class ResponseStore(Protocol):
    """Kept OpenAI responses: each a row naming the history record that holds its work
    (:mod:`imagebridge.storage.response_store`), in the jobs database."""

    async def save(self, record: ResponseRecord) -> ResponseRecord: ...

    async def get(self, scope: str, response_id: str) -> ResponseRecord | None: ...

    async def by_call(self, scope: str, call_id: str) -> ResponseRecord | None: ...

    async def by_job(self, job_id: str) -> ResponseRecord | None: ...

    async def delete(self, scope: str, response_id: str, *, now: int) -> bool: ...

    async def forget(self, response_id: str) -> None: ...

    async def close(self) -> None: ...


class WebhookStore(Protocol):
    """The webhook outbox (events, deliveries to endpoints) and the endpoints, in the jobs
    database. Deliveries are claimed under leases, like the shared job queue, so each is
    attempted by one instance at a time; attempts are fenced by the lease.
    """

    async def emit(
        self,
        events: Sequence[OutboxEvent],
        *,
        limits: OutboxLimits,
        now_ms: int,
        max_payload_bytes: int | None = None,
    ) -> builtins.list[str]: ...

    async def create_endpoint(
        self, endpoint: EndpointWrite, *, now: int, max_endpoints: int
    ) -> WebhookEndpointRecord | None: ...

    async def get_endpoint(self, endpoint_id: str) -> WebhookEndpointRecord: ...

    async def list_endpoints(
        self, *, after: str | None = None, limit: int = ...
    ) -> tuple[builtins.list[WebhookEndpointRecord], bool]: ...

    async def update_endpoint(
        self, endpoint_id: str, values: Mapping[str, object], *, now: int
    ) -> WebhookEndpointRecord | None: ...

    async def rotate_secret(
        self,
        endpoint_id: str,
        *,
        secret: str,
        hint: str,
        keep_previous_until: int | None,
        now: int,
    ) -> WebhookEndpointRecord | None: ...

    async def delete_endpoint(self, endpoint_id: str, *, now_ms: int) -> bool: ...

    async def endpoint_secrets(self, endpoint_id: str) -> WebhookSecrets: ...

    async def sync_configured(
        self, endpoints: Mapping[str, EndpointWrite], *, now: int, now_ms: int
    ) -> None: ...

    async def claim(
        self, owner: str, *, limit: int, now_ms: int, lease_ms: int
    ) -> builtins.list[WebhookTarget]: ...

    async def finish(
        self,
        delivery_id: str,
        owner: str,
        *,
        status: str,
        now_ms: int,
        next_attempt_at: int | None = None,
        http_status: int | None = None,
        error_code: str | None = None,
        error: str | None = None,
    ) -> bool: ...

    async def release(self, delivery_ids: Sequence[str], owner: str, *, now_ms: int) -> int: ...

    async def redeliver(
        self, delivery_id: str, *, now_ms: int, retry_period_ms: int
    ) -> WebhookDeliveryRecord: ...

    async def get_delivery(self, delivery_id: str) -> WebhookDeliveryRecord: ...

    async def list_deliveries(
        self,
        *,
        endpoint_id: str | None = None,
        status: str | None = None,
        event_type: str | None = None,
        event_id: str | None = None,
        after: str | None = None,
        limit: int = ...,
    ) -> WebhookDeliveryPage: ...

    async def statistics(self) -> OutboxStatistics: ...

    async def prune(self, *, before_ms: int, max_retained: int) -> int: ...

    async def delivering(self, owner: str) -> builtins.list[str]: ...

    async def close(self) -> None: ...
