"""The shared job queue on both backends: claim_next, leases, expiry, notifications.

Every test taking ``open_shared`` / ``shared_store`` runs once on SQLite and once on
PostgreSQL; each ``open_shared()`` call is one more bridge instance on the same database.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import JobEvent, JobEventKind, SharedJobStore
from imagebridge.storage.rules.queue import MAX_HEARTBEAT_JOBS, MAX_LEASE_SECS, MAX_QUEUE_PROVIDERS
from imagebridge.storage.rules.values import MAX_INTEGER

from .conftest import SCOPE, OpenShared, job_id, request, response

ROOMY: dict[str, Any] = {"max_pending": 1_000, "max_database_bytes": 1 << 30}


async def add(
    store: SharedJobStore,
    n: int,
    provider: str | None,
    *,
    now: int | None = None,
    key: str | None = None,
    **limits: Any,
) -> Any:
    body = request(f"job {n}")
    return await store.create(
        SCOPE,
        job_id(n),
        body,
        body["prompt"],
        submission_key=key,
        fingerprint=("f" * 64 if key is not None else None),
        now=now if now is not None else 100 + n,
        provider=provider,
        **(limits or ROOMY),
    )


async def first_event(events: Any, timeout: float = 10.0) -> JobEvent:
    async with asyncio.timeout(timeout):
        event: JobEvent = await anext(events)
        return event


# -- claim_next --------------------------------------------------------------------------------


async def test_claim_next_takes_the_oldest_job_for_its_providers(
    shared_store: SharedJobStore,
) -> None:
    await add(shared_store, 1, "alpha", now=10)
    await add(shared_store, 2, "beta", now=11)
    await add(shared_store, 3, None, now=12)  # no recorded provider: anyone may run it
    await add(shared_store, 4, "beta", now=13)

    claimed = await shared_store.claim_next("node-b", ["beta"], now=5, lease_secs=30)
    assert claimed is not None
    assert (claimed.id, claimed.provider) == (job_id(2), "beta")
    # Same transition as claim(): running, stage "starting", timestamps never go backwards.
    assert (claimed.status, claimed.progress_stage) == (ImageJobStatus.RUNNING, "starting")
    assert (claimed.started_at, claimed.updated_at) == (11, 11)

    order = []
    while job := await shared_store.claim_next("node-b", ["beta"], now=100, lease_secs=30):
        order.append((job.id, job.provider))
    assert order == [(job_id(3), None), (job_id(4), "beta")]
    assert await shared_store.claim_next("node-x", ["gamma"], now=100, lease_secs=30) is None
    assert await shared_store.claim_next("node-x", [], now=100, lease_secs=30) is None
    alpha = await shared_store.claim_next("node-a", ["gamma", "alpha"], now=100, lease_secs=30)
    assert alpha is not None
    assert alpha.id == job_id(1)
    assert (await shared_store.statistics()).queued == 0


async def test_claim_next_skips_cancelled_and_already_claimed_jobs(
    shared_store: SharedJobStore,
) -> None:
    for n in range(1, 5):
        await add(shared_store, n, "p")
    await shared_store.request_cancel(SCOPE, job_id(1), now=200)
    assert await shared_store.claim(SCOPE, job_id(2), now=200)
    claimed = await shared_store.claim_next("node", ["p"], now=200, lease_secs=30)
    assert claimed is not None
    assert claimed.id == job_id(3)
    assert (await shared_store.get(SCOPE, job_id(1))).status is ImageJobStatus.CANCELLED


async def test_concurrent_claimers_never_get_the_same_job(open_shared: OpenShared) -> None:
    instances = [await open_shared() for _ in range(4)]
    for n in range(40):
        await add(instances[0], n, "p" if n % 2 else "q")
    claims: list[tuple[str, str]] = []

    async def worker(store: SharedJobStore, name: str) -> None:
        for _ in range(40):  # bounded: more attempts than jobs
            job = await store.claim_next(name, ["p", "q"], now=500, lease_secs=60)
            if job is None:
                return
            claims.append((name, job.id))

    await asyncio.gather(
        *(worker(store, f"node-{i}") for i, store in enumerate(instances) for _ in range(2))
    )
    ids = [job for _, job in claims]
    assert len(ids) == len(set(ids)) == 40
    stats = await instances[0].statistics()
    assert (stats.queued, stats.running) == (0, 40)
    counts = await instances[1].instance_counts()
    assert counts == dict(Counter(name for name, _ in claims))
    assert sum(counts.values()) == 40


async def test_replays_keep_the_first_route_and_refusals_leave_no_trace(
    shared_store: SharedJobStore,
) -> None:
    await add(shared_store, 1, "alpha", key="k")
    replay = await add(shared_store, 2, "beta", key="k")
    assert (replay.created, replay.job.id) == (False, job_id(1))
    with pytest.raises(BridgeError) as full:
        await add(shared_store, 3, "beta", max_pending=1, max_database_bytes=1 << 30)
    assert full.value.code is ErrorCode.OVERLOADED
    assert await shared_store.claim_next("n", ["beta"], now=500, lease_secs=5) is None
    claimed = await shared_store.claim_next("n", ["alpha"], now=500, lease_secs=5)
    assert claimed is not None
    assert claimed.id == job_id(1)
    # The refused id is free: a later submission with it works and routes as asked.
    await add(shared_store, 3, "beta")
    later = await shared_store.claim_next("n", ["beta"], now=501, lease_secs=5)
    assert later is not None
    assert later.id == job_id(3)


# -- leases ------------------------------------------------------------------------------------


async def test_heartbeat_extends_only_this_instances_running_leases(
    shared_store: SharedJobStore,
) -> None:
    for n in (1, 2, 3):
        await add(shared_store, n, "p")
    mine = await shared_store.claim_next("node-a", ["p"], now=1_000, lease_secs=10)
    theirs = await shared_store.claim_next("node-b", ["p"], now=1_000, lease_secs=10)
    assert mine is not None
    assert theirs is not None

    renewal = await shared_store.heartbeat(
        "node-a", [mine.id, theirs.id, job_id(3), job_id(99)], now=1_008, lease_secs=10
    )
    assert renewal.renewed == {mine.id}
    assert renewal.cancel_requested == set()

    # node-b missed its heartbeat: only its job expires at 1_010; mine now runs to 1_018.
    assert await shared_store.expire_leases(now=1_010) == 1
    assert (await shared_store.get(SCOPE, theirs.id)).status is ImageJobStatus.INTERRUPTED
    assert (await shared_store.get(SCOPE, mine.id)).status is ImageJobStatus.RUNNING
    # A shorter renewal never pulls a lease back.
    await shared_store.heartbeat("node-a", [mine.id], now=1_011, lease_secs=1)
    assert await shared_store.expire_leases(now=1_017) == 0
    assert await shared_store.expire_leases(now=1_018) == 1
    late = await shared_store.heartbeat("node-a", [mine.id], now=1_019, lease_secs=10)
    assert late.renewed == set()


async def test_heartbeat_reports_cancellation_requested_elsewhere(open_shared: OpenShared) -> None:
    worker, api = await open_shared(), await open_shared()
    await add(api, 1, "p")
    await add(api, 2, "p")
    first = await worker.claim_next("node", ["p"], now=100, lease_secs=30)
    second = await worker.claim_next("node", ["p"], now=100, lease_secs=30)
    assert first is not None
    assert second is not None
    flagged = await api.request_cancel(SCOPE, first.id, now=105)
    assert (flagged.status, flagged.cancel_requested) == (ImageJobStatus.RUNNING, True)
    renewal = await worker.heartbeat("node", [first.id, second.id], now=110, lease_secs=30)
    assert renewal.renewed == {first.id, second.id}
    assert renewal.cancel_requested == {first.id}
    finished = await worker.succeed(SCOPE, second.id, response(second.id), now=111)
    assert finished.status is ImageJobStatus.SUCCEEDED
    after = await worker.heartbeat("node", [first.id, second.id], now=112, lease_secs=30)
    assert after.renewed == {first.id}


async def test_expired_leases_end_interrupted_and_never_run_again(
    shared_store: SharedJobStore,
) -> None:
    await add(shared_store, 1, "p")
    await add(shared_store, 2, "p")
    leased = await shared_store.claim_next("crashed-node", ["p"], now=1_000, lease_secs=5)
    assert leased is not None
    assert await shared_store.progress(
        SCOPE, leased.id, stage="provider_progress", partial_images=1, now=1_001
    )
    # A job claimed without a lease belongs to a single-instance manager: never expired.
    assert await shared_store.claim(SCOPE, job_id(2), now=1_000)

    assert await shared_store.expire_leases(now=1_004) == 0
    assert await shared_store.expire_leases(now=1_005) == 1
    assert await shared_store.expire_leases(now=1_006) == 0
    job = await shared_store.get(SCOPE, leased.id)
    assert job.status is ImageJobStatus.INTERRUPTED
    assert (job.completed_at, job.progress_stage) == (1_005, "provider_progress")
    error = job.error()
    assert error is not None
    assert (error["code"], error["message"], error["retryable"], error["details"]) == (
        "cancelled",
        "bridge stopped while provider completion was uncertain",
        False,
        {"recovery": "inspect_history_before_retrying"},
    )
    # Terminal accounting: the 256 KiB reserve is released.
    stats = await shared_store.statistics()
    running = await shared_store.get(SCOPE, job_id(2))
    assert stats.logical_bytes == job.logical_bytes + running.logical_bytes
    assert job.logical_bytes < running.logical_bytes

    # The late owner cannot finish it, and nobody can claim it again.
    with pytest.raises(BridgeError) as late:
        await shared_store.succeed(SCOPE, leased.id, response(leased.id), now=1_007)
    assert (late.value.code, late.value.message) == (
        ErrorCode.INTERNAL,
        "durable job is not running",
    )
    assert await shared_store.claim_next("other", ["p"], now=1_008, lease_secs=5) is None
    assert (await shared_store.get(SCOPE, job_id(2))).status is ImageJobStatus.RUNNING


async def test_expiry_error_matches_restart_recovery(shared_store: SharedJobStore) -> None:
    await add(shared_store, 1, "p")
    await add(shared_store, 2, "p")
    leased = await shared_store.claim_next("node", ["p"], now=10, lease_secs=1)
    assert leased is not None
    assert await shared_store.claim(SCOPE, job_id(2), now=10)
    assert await shared_store.expire_leases(now=11) == 1
    assert await shared_store.recover_interrupted(now=11) == 1
    expired = await shared_store.get(SCOPE, job_id(1))
    recovered = await shared_store.get(SCOPE, job_id(2))
    assert expired.error() == recovered.error()


async def test_lease_deadlines_fit_64_bit_timestamps(shared_store: SharedJobStore) -> None:
    await add(shared_store, 1, "p", now=MAX_INTEGER - 5)
    claimed = await shared_store.claim_next(
        "node", ["p"], now=MAX_INTEGER - 1, lease_secs=MAX_LEASE_SECS
    )
    assert claimed is not None
    renewal = await shared_store.heartbeat(
        "node", [claimed.id], now=MAX_INTEGER, lease_secs=MAX_LEASE_SECS
    )
    assert renewal.renewed == {claimed.id}
    assert await shared_store.expire_leases(now=MAX_INTEGER - 1) == 0
    assert await shared_store.expire_leases(now=MAX_INTEGER) == 1


async def test_instance_counts_show_running_leases_per_instance(
    shared_store: SharedJobStore,
) -> None:
    assert await shared_store.instance_counts() == {}
    for n in range(5):
        await add(shared_store, n, "p")
    for name in ("b", "a", "a"):
        assert await shared_store.claim_next(name, ["p"], now=200, lease_secs=60) is not None
    assert await shared_store.claim(SCOPE, job_id(3), now=200)  # unleased: not counted
    assert await shared_store.instance_counts() == {"a": 2, "b": 1}
    done = await shared_store.claim_next("a", ["p"], now=200, lease_secs=60)
    assert done is not None
    await shared_store.fail(SCOPE, done.id, "failed", {"code": "upstream"}, now=201)
    assert await shared_store.instance_counts() == {"a": 2, "b": 1}


async def test_queued_jobs_are_counted_per_route(shared_store: SharedJobStore) -> None:
    assert await shared_store.queued_by_provider() == {}
    for n, provider in enumerate(["p", "p", "q", None, "p"]):
        await add(shared_store, n, provider)
    assert await shared_store.queued_by_provider() == {"*": 1, "p": 3, "q": 1}
    claimed = await shared_store.claim_next("a", ["q"], now=300, lease_secs=60)
    assert claimed is not None
    await shared_store.request_cancel(SCOPE, job_id(1), now=300)  # queued → cancelled
    assert await shared_store.queued_by_provider() == {"*": 1, "p": 2}


async def test_queue_arguments_are_checked_before_any_write(shared_store: SharedJobStore) -> None:
    await add(shared_store, 1, "p")
    bad_calls = [
        (shared_store.claim_next("", ["p"], now=1, lease_secs=5), "instance_id"),
        (shared_store.claim_next("n\n", ["p"], now=1, lease_secs=5), "instance_id"),
        (shared_store.claim_next("x" * 257, ["p"], now=1, lease_secs=5), "instance_id"),
        (shared_store.claim_next("n", "p", now=1, lease_secs=5), "providers"),
        (shared_store.claim_next("n", [" "], now=1, lease_secs=5), "provider"),
        (
            shared_store.claim_next(
                "n", [f"p{i}" for i in range(MAX_QUEUE_PROVIDERS + 1)], now=1, lease_secs=5
            ),
            "providers",
        ),
        (shared_store.claim_next("n", ["p"], now=1, lease_secs=0), "lease_secs"),
        (shared_store.claim_next("n", ["p"], now=1, lease_secs=MAX_LEASE_SECS + 1), "lease_secs"),
        (shared_store.claim_next("n", ["p"], now=1, lease_secs=True), "lease_secs"),
        (shared_store.heartbeat("n", ["not-a-uuid"], now=1, lease_secs=5), "id"),
        (
            shared_store.heartbeat(
                "n", [job_id(i) for i in range(MAX_HEARTBEAT_JOBS + 1)], now=1, lease_secs=5
            ),
            "job_ids",
        ),
        (shared_store.notify_job_event("exploded", job_id(1)), "kind"),
        (shared_store.notify_job_event(JobEventKind.QUEUED, "../x"), "id"),
    ]
    for call, field in bad_calls:
        with pytest.raises(BridgeError) as caught:
            await call
        assert caught.value.code is ErrorCode.INTERNAL
        assert caught.value.field == field
    with pytest.raises(BridgeError) as bad_route:
        await add(shared_store, 2, "bad\x00provider")
    assert bad_route.value.field == "provider"
    assert (await shared_store.statistics()).running == 0
    assert (await shared_store.statistics()).total == 1


async def test_shared_stores_satisfy_the_protocol(shared_store: SharedJobStore) -> None:
    assert isinstance(shared_store, SharedJobStore)


# -- notifications -----------------------------------------------------------------------------


async def test_notifications_reach_other_instances_in_order(open_shared: OpenShared) -> None:
    sender, receiver = await open_shared(), await open_shared()
    await sender.notify_job_event(JobEventKind.QUEUED, job_id(0))  # before subscribing: unseen
    async with receiver.subscribe() as events:
        await sender.notify_job_event(JobEventKind.QUEUED, job_id(1))
        await sender.notify_job_event("cancel_requested", job_id(2))
        await receiver.notify_job_event(JobEventKind.FINISHED, job_id(3))  # its own, too
        got = [await first_event(events) for _ in range(3)]
    assert got == [
        JobEvent(JobEventKind.QUEUED, job_id(1)),
        JobEvent(JobEventKind.CANCEL_REQUESTED, job_id(2)),
        JobEvent(JobEventKind.FINISHED, job_id(3)),
    ]


async def test_every_subscriber_gets_every_notification(open_shared: OpenShared) -> None:
    store = await open_shared()
    async with store.subscribe() as first, store.subscribe() as second:
        await store.notify_job_event(JobEventKind.PROGRESS, job_id(7))
        expected = JobEvent(JobEventKind.PROGRESS, job_id(7))
        assert await first_event(first) == expected
        assert await first_event(second) == expected


async def test_a_waiting_subscriber_can_be_cancelled_and_closed(open_shared: OpenShared) -> None:
    store = await open_shared()
    async with store.subscribe() as events:
        waiting = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    # The store itself is unaffected.
    await store.notify_job_event(JobEventKind.QUEUED, job_id(1))
    assert await store.healthy()
