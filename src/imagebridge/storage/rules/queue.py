"""The shared job queue's rules (issue 14): routes, leases and the notification codec.

Several bridge instances may share one job store: each job records the provider it routes to,
an instance claims jobs for its providers under a lease it renews with heartbeats, and job
notifications wake the other instances early. Both backends check every queue call with
these functions and speak the same notification payload.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from typing import NamedTuple

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.records import JobEvent, JobEventKind
from imagebridge.storage.rules.jobs import check_job_id
from imagebridge.storage.rules.values import (
    MAX_INTEGER,
    check_timestamp,
    has_control_characters,
    is_canonical_uuid,
    utf8_size,
)

__all__ = [
    "MAX_HEARTBEAT_JOBS",
    "MAX_LEASE_SECS",
    "MAX_QUEUE_IDENTIFIER_BYTES",
    "MAX_QUEUE_PROVIDERS",
    "UNROUTED",
    "LeaseRequest",
    "check_claim",
    "check_event_kind",
    "check_heartbeat",
    "check_heartbeat_jobs",
    "check_instance_id",
    "check_lease_secs",
    "check_provider",
    "check_providers",
    "check_record_lease",
    "decode_job_event",
    "encode_job_event",
    "job_event",
    "lease_deadline",
]

UNROUTED = "*"
"""The ``queued_by_provider`` key of jobs without a recorded provider (any instance's)."""

MAX_QUEUE_IDENTIFIER_BYTES = 256
"""Longest instance id or provider name the queue stores."""

MAX_QUEUE_PROVIDERS = 64
"""Most providers one ``claim_next`` call may name."""

MAX_HEARTBEAT_JOBS = 10_000
"""Most jobs one heartbeat may renew."""

MAX_LEASE_SECS = 7 * 24 * 3600
"""Longest lease: a week, far beyond any image job's deadline."""

_MAX_EVENT_PAYLOAD_BYTES = 1_024


# -- routes and leases -----------------------------------------------------------------------


def _check_identifier(value: object, label: str, field: str) -> str:
    size = utf8_size(value) if isinstance(value, str) else None
    if (
        not isinstance(value, str)
        or not value.strip()
        or size is None
        or size > MAX_QUEUE_IDENTIFIER_BYTES
        or has_control_characters(value)
    ):
        raise BridgeError(
            ErrorCode.INTERNAL,
            f"{label} must be 1-{MAX_QUEUE_IDENTIFIER_BYTES} bytes without control characters",
            details={"field": field},
        )
    return value


def check_instance_id(instance_id: object) -> str:
    """The id an instance claims and heartbeats under (non-blank, ≤ 256 bytes, no controls)."""
    return _check_identifier(instance_id, "instance id", "instance_id")


def check_provider(provider: object) -> str:
    """The resolved primary provider a job is routed to."""
    return _check_identifier(provider, "provider name", "provider")


def check_providers(providers: object) -> builtins.list[str]:
    """The providers an instance serves: a sequence of names (not one bare string)."""
    if isinstance(providers, str | bytes) or not isinstance(providers, Sequence):
        raise BridgeError(
            ErrorCode.INTERNAL,
            "providers must be a list of provider names",
            details={"field": "providers"},
        )
    if len(providers) > MAX_QUEUE_PROVIDERS:
        raise BridgeError(
            ErrorCode.INTERNAL,
            f"at most {MAX_QUEUE_PROVIDERS} providers can be claimed for at once",
            details={"field": "providers"},
        )
    return sorted({check_provider(provider) for provider in providers})


def check_heartbeat_jobs(job_ids: object) -> builtins.list[str]:
    """Canonical job ids, de-duplicated, at most :data:`MAX_HEARTBEAT_JOBS`."""
    if isinstance(job_ids, str | bytes) or not isinstance(job_ids, Sequence):
        raise BridgeError(
            ErrorCode.INTERNAL, "job_ids must be a list of job ids", details={"field": "job_ids"}
        )
    if len(job_ids) > MAX_HEARTBEAT_JOBS:
        raise BridgeError(
            ErrorCode.INTERNAL,
            f"at most {MAX_HEARTBEAT_JOBS} jobs can be renewed at once",
            details={"field": "job_ids"},
        )
    return sorted({check_job_id(job_id) for job_id in job_ids})


def check_lease_secs(lease_secs: object) -> int:
    if (
        isinstance(lease_secs, bool)
        or not isinstance(lease_secs, int)
        or not 1 <= lease_secs <= MAX_LEASE_SECS
    ):
        raise BridgeError(
            ErrorCode.INTERNAL,
            f"lease_secs must be between 1 and {MAX_LEASE_SECS}",
            details={"field": "lease_secs"},
        )
    return lease_secs


def lease_deadline(now: int, lease_secs: int) -> int:
    """When a lease taken at ``now`` runs out (capped, so it always fits a 64-bit integer)."""
    return min(now + lease_secs, MAX_INTEGER)


class LeaseRequest(NamedTuple):
    """A checked ``claim_next`` or ``heartbeat`` call."""

    owner: str
    """The instance that holds the leases."""
    targets: builtins.list[str]
    """Sorted, de-duplicated: the providers to claim for, or the jobs to renew."""
    deadline: int
    """When the leases run out."""


def _lease_request(
    owner: str, targets: builtins.list[str], now: int, lease_secs: object
) -> LeaseRequest:
    check_timestamp(now)
    return LeaseRequest(owner, targets, lease_deadline(now, check_lease_secs(lease_secs)))


def check_claim(
    instance_id: object, providers: object, *, now: int, lease_secs: object
) -> LeaseRequest:
    """The checks ``claim_next`` makes, in order: instance id, providers, time, lease."""
    owner = check_instance_id(instance_id)
    wanted = check_providers(providers)
    return _lease_request(owner, wanted, now, lease_secs)


def check_heartbeat(
    instance_id: object, job_ids: object, *, now: int, lease_secs: object
) -> LeaseRequest:
    """The checks ``heartbeat`` makes, in order: instance id, job ids, time, lease."""
    owner = check_instance_id(instance_id)
    ids = check_heartbeat_jobs(job_ids)
    return _lease_request(owner, ids, now, lease_secs)


def check_record_lease(lease: tuple[str, int], now: int) -> tuple[str, int]:
    """A synchronous record's lease ``(instance, lease_secs)`` as ``(owner, deadline)``."""
    instance_id, lease_secs = lease
    owner = check_instance_id(instance_id)
    return owner, lease_deadline(now, check_lease_secs(lease_secs))


# -- notifications ---------------------------------------------------------------------------


def check_event_kind(kind: object) -> JobEventKind:
    if isinstance(kind, str) and kind in JobEventKind.__members__.values():
        return JobEventKind(kind)
    raise BridgeError(ErrorCode.INTERNAL, "unknown job event kind", details={"field": "kind"})


def encode_job_event(kind: JobEventKind | str, job_id: str) -> str:
    """The notification payload: compact JSON ``{"kind": ..., "job_id": ...}``."""
    checked = check_event_kind(kind)
    check_job_id(job_id)
    return json.dumps({"kind": checked.value, "job_id": job_id}, separators=(",", ":"))


def job_event(kind: object, job_id: object) -> JobEvent | None:
    """A stored or received ``(kind, job_id)`` as an event; ``None`` when either is unknown."""
    if not isinstance(kind, str) or not isinstance(job_id, str) or not is_canonical_uuid(job_id):
        return None
    try:
        return JobEvent(kind=JobEventKind(kind), job_id=job_id)
    except ValueError:
        return None


def decode_job_event(payload: object) -> JobEvent | None:
    """A received payload as an event, or ``None`` for anything this bridge did not send."""
    if not isinstance(payload, str) or len(payload) > _MAX_EVENT_PAYLOAD_BYTES:
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict) or set(data) != {"kind", "job_id"}:
        return None
    return job_event(data["kind"], data["job_id"])
