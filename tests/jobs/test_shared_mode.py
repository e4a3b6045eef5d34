"""Shared mode: several job managers ("instances") on one database, on SQLite and PostgreSQL.

Each ``make_instance`` call is one more bridge instance with its own runtime, providers and
store handle. Instances share a fake clock, so lease expiry is driven by hand; heartbeats
and reaping are called directly unless a test says otherwise.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import Any

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.request import ImageRequest
from imagebridge.jobs import JobManager, JobManagerSettings, SharedQueueSettings
from imagebridge.jobs.shared_mode import default_instance_id
from imagebridge.storage import (
    JobRecord,
    PostgresSharedJobStore,
    SqliteJobStore,
    SqliteSharedJobStore,
)
from tests.jobs.conftest import (
    SCOPE,
    BridgeFactory,
    FakeClock,
    InstanceFactory,
    image_request,
)
from tests.support.waiting import eventually

SLOW = "[mock:latency=20000]"


def routed(prompt: str, provider: str | None) -> ImageRequest:
    request = image_request(prompt)
    if provider is None:
        return request
    return request.model_copy(
        update={"routing": request.routing.model_copy(update={"provider": provider})}
    )


def running(job: Any) -> bool:
    return bool(job.status is ImageJobStatus.RUNNING and job.progress.stage != "starting")


async def test_instances_share_one_queue_and_run_each_job_once(
    make_instance: InstanceFactory,
) -> None:
    settings = JobManagerSettings(max_running=2)
    a = await make_instance("node-a", settings=settings)
    b = await make_instance("node-b", settings=settings)
    ids = []
    for n in range(16):
        via = a if n % 2 else b
        job, created = await via.manager.submit(SCOPE, image_request(f"[mock:latency=40] fox {n}"))
        assert created and job.status is ImageJobStatus.QUEUED
        ids.append(job.id)
    for job_id in ids:
        assert (await a.settled(job_id)).status is ImageJobStatus.SUCCEEDED
    # Every job ran exactly once, and both instances took a share of the work.
    calls = (a.provider().calls, b.provider().calls)
    assert sum(calls) == len(ids) and min(calls) > 0
    for instance in (a, b):
        page = await instance.manager.list(SCOPE, limit=100)
        assert sorted(item.id for item in page.items) == sorted(ids)


async def test_a_job_queued_elsewhere_is_picked_up_by_notification_not_polling(
    make_instance: InstanceFactory,
) -> None:
    # The claimer polls only every 60 s: only the "queued" notification can wake it in time.
    claimer = await make_instance("node-a", poll_interval_s=60.0)
    submitter = await make_instance("node-b", start=False)
    await asyncio.sleep(0.2)  # the claimer's start-up pass has found nothing
    started = time.monotonic()
    job, _ = await submitter.manager.submit(SCOPE, image_request("wake up"))
    assert (await claimer.settled(job.id)).status is ImageJobStatus.SUCCEEDED
    assert time.monotonic() - started < 10
    assert (claimer.provider().calls, submitter.provider().calls) == (1, 0)


async def test_jobs_run_only_where_their_provider_is_served(
    make_instance: InstanceFactory,
) -> None:
    a = await make_instance("node-a", providers=("mock",))
    b = await make_instance("node-b", providers=("mock", "alpha"))
    job, _ = await a.manager.submit(SCOPE, routed("fox", "alpha"))
    done = await a.settled(job.id)
    assert done.status is ImageJobStatus.SUCCEEDED
    assert done.result is not None and done.result.provider == "alpha"
    assert (b.provider("alpha").calls, a.provider().calls) == (1, 0)

    # Nobody serves "beta": the job waits, visible per route, until it is cancelled.
    stranded, _ = await b.manager.submit(SCOPE, routed("fox", "beta"))
    stats = await a.manager.queue_statistics()
    assert stats["queued_by_provider"] == {"beta": 1}
    assert (await b.manager.cancel(SCOPE, stranded.id)).status is ImageJobStatus.CANCELLED
    assert (await a.manager.queue_statistics())["queued_by_provider"] == {}


async def test_a_job_naming_no_provider_runs_on_the_submitters_default(
    make_instance: InstanceFactory,
) -> None:
    # The submitter is not claiming; the claimer's own default is another provider.
    submitter = await make_instance("node-a", providers=("mock",), start=False)
    claimer = await make_instance("node-b", 'default_provider="alpha"', providers=("alpha", "mock"))
    job, _ = await submitter.manager.submit(SCOPE, image_request("fox"))
    done = await claimer.settled(job.id)
    assert done.result is not None and done.result.provider == "mock"
    assert done.request.routing.provider is None  # the stored request is unchanged
    assert (claimer.provider("mock").calls, claimer.provider("alpha").calls) == (1, 0)


async def test_cancel_reaches_the_instance_running_the_job(
    make_instance: InstanceFactory,
) -> None:
    a = await make_instance("node-a")
    b = await make_instance("node-b", start=False)  # receives the cancel, runs nothing
    job, _ = await b.manager.submit(SCOPE, image_request(SLOW))
    await a.reached(job.id, running)
    flagged = await b.manager.cancel(SCOPE, job.id)
    assert flagged.status is ImageJobStatus.RUNNING and flagged.cancel_requested
    started = time.monotonic()
    done = await a.settled(job.id)  # no heartbeat runs: the notification carries it
    assert time.monotonic() - started < 5
    assert done.status is ImageJobStatus.CANCELLED
    assert done.error is not None and done.error.code is ErrorCode.CANCELLED
    assert a.provider().cancellations == 1


async def test_a_cancel_without_a_notification_arrives_with_the_next_heartbeat(
    make_instance: InstanceFactory,
) -> None:
    a = await make_instance("node-a")
    job, _ = await a.manager.submit(SCOPE, image_request(SLOW))
    await a.reached(job.id, running)
    # Only the durable flag, as if the notification were lost.
    await a.store.request_cancel(SCOPE, job.id, now=int(a.clock()))
    await asyncio.sleep(0.1)
    assert (await a.manager.get(SCOPE, job.id)).status is ImageJobStatus.RUNNING
    await a.queue.heartbeat()
    assert (await a.settled(job.id)).status is ImageJobStatus.CANCELLED


async def test_a_dead_instances_jobs_end_interrupted_after_the_lease_and_never_rerun(
    make_instance: InstanceFactory,
) -> None:
    survivor = await make_instance("node-b", lease_secs=30)
    job, _ = await survivor.manager.submit(SCOPE, image_request("[mock:latency=0] fox"))
    await survivor.settled(job.id)
    # A second job is claimed by an instance that then dies without a trace.
    second, _ = await survivor.manager.submit(SCOPE, routed("fox", "ghost-only"))
    now = int(survivor.clock())
    claimed = await survivor.store.claim_next("ghost", ["ghost-only"], now=now, lease_secs=30)
    assert claimed is not None and claimed.id == second.id

    survivor.clock.advance(29)
    assert await survivor.queue.reap_expired() == 0
    assert (await survivor.manager.queue_statistics())["leases"] == {"ghost": 1}
    survivor.clock.advance(1)
    assert await survivor.queue.reap_expired() == 1
    done = await survivor.manager.get(SCOPE, second.id)
    assert done.status is ImageJobStatus.INTERRUPTED
    assert done.error is not None and done.error.code is ErrorCode.CANCELLED
    assert done.error.details["recovery"] == "inspect_history_before_retrying"
    await asyncio.sleep(0.1)
    assert survivor.provider().calls == 1  # only the first job ever ran
    assert (await survivor.manager.queue_statistics())["leases"] == {}


async def test_an_instance_that_lost_its_lease_stops_and_leaves_the_record_alone(
    make_instance: InstanceFactory,
) -> None:
    a = await make_instance("node-a", lease_secs=30)
    b = await make_instance("node-b", lease_secs=30, start=False)
    job, _ = await a.manager.submit(SCOPE, image_request(SLOW))
    await a.reached(job.id, running)
    a.clock.advance(31)  # node-a missed its heartbeats (a long pause, a lost network)
    assert await b.store.expire_leases(now=int(b.clock())) == 1
    await a.queue.heartbeat()  # not renewed: the work here stops

    async def idle() -> bool:
        return a.manager.active_workers == 0

    await eventually(idle)
    assert a.provider().cancellations == 1
    done = await b.manager.get(SCOPE, job.id)
    assert done.status is ImageJobStatus.INTERRUPTED  # not overwritten as cancelled
    assert done.error is not None and done.error.details["recovery"] == (
        "inspect_history_before_retrying"
    )


async def test_a_new_instance_leaves_other_instances_running_jobs_alone(
    make_instance: InstanceFactory,
) -> None:
    a = await make_instance("node-a")
    job, _ = await a.manager.submit(SCOPE, image_request(SLOW))
    await a.reached(job.id, running)
    late = await make_instance("node-b")  # a single instance would recover "running" rows
    assert (await late.manager.get(SCOPE, job.id)).status is ImageJobStatus.RUNNING
    stats = await late.manager.queue_statistics()
    assert stats["shared"] is True and stats["instance_id"] == "node-b"
    assert stats["leases"] == {"node-a": 1}
    await late.manager.cancel(SCOPE, job.id)
    assert (await a.settled(job.id)).status is ImageJobStatus.CANCELLED


async def test_heartbeats_keep_leases_alive_while_shutdown_drains(
    make_instance: InstanceFactory,
) -> None:
    # Real clocks and loops: a 2 s lease (whole seconds: 1-2 s from its claim) renewed
    # every 0.2 s, reaped by both instances every 0.2 s, and a job of 2.5 s that must
    # outlive its first lease.
    a = await make_instance("node-a", lease_secs=2, heartbeat_secs=0.2, clock=_RealClock())
    b = await make_instance("node-b", lease_secs=2, heartbeat_secs=0.2, clock=_RealClock())
    job, _ = await a.manager.submit(SCOPE, image_request("[mock:latency=2500] fox"))
    await a.reached(job.id, running)
    leases = (await a.manager.queue_statistics())["leases"]
    holder, other = (a, b) if leases == {"node-a": 1} else (b, a)
    await holder.manager.shutdown(timeout_s=10)  # lets the job finish, leases renewed
    assert (await other.manager.get(SCOPE, job.id)).status is ImageJobStatus.SUCCEEDED


class _RealClock(FakeClock):
    def __call__(self) -> float:
        return time.time()


async def test_statistics_name_the_instance_and_count_leases_and_routes(
    make_instance: InstanceFactory,
) -> None:
    a = await make_instance("node-a", providers=("mock", "alpha"))
    idle = await make_instance("node-b", start=False)
    job, _ = await a.manager.submit(SCOPE, image_request(SLOW))
    await a.reached(job.id, running)
    await idle.manager.submit(SCOPE, routed("fox", "beta"))
    await idle.manager.submit(SCOPE, routed("fox", "beta"))
    stats = await idle.manager.queue_statistics()
    assert (stats["shared"], stats["instance_id"]) == (True, "node-b")
    assert stats["leases"] == {"node-a": 1}
    assert stats["queued_by_provider"] == {"beta": 2}
    counts = await idle.manager.statistics()
    assert (counts["queued"], counts["running"]) == (2, 1)
    await a.manager.cancel(SCOPE, job.id)


async def test_a_claim_in_flight_at_shutdown_still_runs_here(
    make_instance: InstanceFactory, backend: str
) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()
    base: Any = SqliteSharedJobStore if backend == "sqlite" else PostgresSharedJobStore

    class GatedStore(base):  # type: ignore[misc]
        gated = False

        async def claim_next(
            self, instance_id: str, providers: Sequence[str], *, now: int, lease_secs: int
        ) -> JobRecord | None:
            claimed = await super().claim_next(
                instance_id, providers, now=now, lease_secs=lease_secs
            )
            if claimed is not None and type(self).gated:
                entered.set()
                await gate.wait()
            return claimed

    submitter = await make_instance("node-a", start=False)
    job, _ = await submitter.manager.submit(SCOPE, image_request("fox"))
    GatedStore.gated = True
    claimer = await make_instance("node-b", store_class=GatedStore)
    await asyncio.wait_for(entered.wait(), 10)
    stopping = asyncio.create_task(claimer.manager.shutdown(timeout_s=10))
    await asyncio.sleep(0.05)
    gate.set()
    await stopping
    done = await submitter.manager.get(SCOPE, job.id)
    assert done.status is ImageJobStatus.SUCCEEDED
    assert claimer.provider().calls == 1


async def test_shared_mode_needs_a_shared_store(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(start=False)
    plain = await SqliteJobStore.open(bridge.data_dir / "plain.sqlite3")
    try:
        with pytest.raises(BridgeError) as refused:
            JobManager(bridge.app.runtime, plain, shared=SharedQueueSettings(instance_id="x"))
        assert refused.value.code is ErrorCode.CONFIGURATION
    finally:
        await plain.close()


def test_default_instance_ids_are_readable_unique_and_valid() -> None:
    first, second = default_instance_id(), default_instance_id()
    assert first != second
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*-\d+-[0-9a-f]{6}", first)
    assert SharedQueueSettings(instance_id=first).instance_id == first


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"instance_id": ""}, "instance_id"),
        ({"instance_id": "a b"}, "instance_id"),
        ({"lease_secs": 0}, "lease_secs"),
        ({"lease_secs": True}, "lease_secs"),
        ({"heartbeat_secs": 0}, "heartbeat_secs"),
        ({"poll_interval_s": -1}, "poll_interval_s"),
        ({"lease_secs": 10, "heartbeat_secs": 5.5}, "heartbeat_secs"),
    ],
)
def test_queue_settings_are_checked(options: dict[str, Any], field: str) -> None:
    with pytest.raises(BridgeError) as refused:
        SharedQueueSettings(**{"instance_id": "node", **options})
    assert refused.value.code is ErrorCode.CONFIGURATION
    assert refused.value.details["field"] == f"server.jobs.{field}"


def test_queue_settings_from_config_use_the_configured_or_a_fresh_id() -> None:
    class Section:
        instance_id: str | None = None
        lease_secs = 40
        heartbeat_secs = 12
        poll_interval_ms = 250

    fresh = SharedQueueSettings.from_config(Section())
    assert (fresh.lease_secs, fresh.heartbeat_secs, fresh.poll_interval_s) == (40, 12.0, 0.25)
    assert fresh.instance_id != SharedQueueSettings.from_config(Section()).instance_id
    Section.instance_id = "node-7"
    assert SharedQueueSettings.from_config(Section()).instance_id == "node-7"


async def test_claim_failures_are_retried_and_logged_once(
    make_instance: InstanceFactory, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    base: Any = SqliteSharedJobStore if backend == "sqlite" else PostgresSharedJobStore

    class FlakyStore(base):  # type: ignore[misc]
        failures = 5

        async def claim_next(
            self, instance_id: str, providers: Sequence[str], *, now: int, lease_secs: int
        ) -> JobRecord | None:
            if type(self).failures:
                type(self).failures -= 1
                raise BridgeError(ErrorCode.INTERNAL, "durable job database is unavailable")
            return await super().claim_next(instance_id, providers, now=now, lease_secs=lease_secs)

    flaky = await make_instance("node-a", store_class=FlakyStore, poll_interval_s=0.01)
    job, _ = await flaky.manager.submit(SCOPE, image_request("fox"))
    assert (await flaky.settled(job.id)).status is ImageJobStatus.SUCCEEDED
    assert FlakyStore.failures == 0
    warnings = [r for r in caplog.records if r.getMessage() == "could not claim queued jobs"]
    assert len(warnings) == 1
