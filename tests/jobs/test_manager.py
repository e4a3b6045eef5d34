"""The durable job manager over a real runtime (mock provider) and a real SQLite store."""

from __future__ import annotations

import asyncio
import base64
import io
from typing import Any

import pytest
from PIL import Image

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.enums import ImageJobStatus, OutputFormat
from imagebridge.contract.events import CompletedEvent, PartialImageEvent, ProgressEvent
from imagebridge.contract.jobs import ImageJobUpdate
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.provider import ProviderContext
from imagebridge.jobs import TRIMMED_WARNING, JobManagerSettings, progress_stage
from imagebridge.providers.mock import MockProvider, render_image
from imagebridge.storage import SqliteJobStore
from tests.jobs.conftest import (
    OTHER_SCOPE,
    SCOPE,
    BridgeFactory,
    image_request,
)
from tests.support.waiting import eventually

SLOW = "[mock:latency=20000]"


def keyed(request: ImageRequest, key: str) -> ImageRequest:
    return request.model_copy(update={"idempotency_key": key})


def running(job: Any) -> bool:
    return bool(job.status is ImageJobStatus.RUNNING and job.progress.stage != "starting")


class RecordingStore(SqliteJobStore):
    """The real store, noting claims and progress stages as the manager writes them."""

    claims: list[str]
    stages: list[tuple[str, int]]

    async def claim(self, scope: str, job_id: str, *, now: int) -> bool:
        self.__dict__.setdefault("claims", []).append(job_id)
        return await super().claim(scope, job_id, now=now)

    async def progress(
        self, scope: str, job_id: str, *, stage: str, partial_images: int, now: int
    ) -> bool:
        self.__dict__.setdefault("stages", []).append((stage, partial_images))
        return await super().progress(
            scope, job_id, stage=stage, partial_images=partial_images, now=now
        )


class BrokenPruneStore(SqliteJobStore):
    broken = False

    async def prune(
        self, *, now: int, retention_secs: int, max_retained: int, max_retained_bytes: int
    ) -> int:
        if self.broken:
            raise BridgeError(ErrorCode.INTERNAL, "durable job database is unavailable")
        return await super().prune(
            now=now,
            retention_secs=retention_secs,
            max_retained=max_retained,
            max_retained_bytes=max_retained_bytes,
        )


class BadPreviewMock(MockProvider):
    """Emits a partial preview that is not an image before generating normally."""

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        junk = base64.b64encode(b"definitely not an image").decode()
        await context.emit(PartialImageEvent(index=0, partial_index=0, b64_json=junk))
        return await super().execute(request, context)


class BurstPreviewMock(MockProvider):
    """Emits three previews back to back, faster than progress can be written."""

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        preview = base64.b64encode(render_image("fox", 0, 8, 8, OutputFormat.PNG)).decode()
        for index in range(3):
            await context.emit(PartialImageEvent(index=0, partial_index=index, b64_json=preview))
        return await super().execute(request, context)


# -- lifecycle -------------------------------------------------------------------------------


async def test_job_runs_to_succeeded_with_owned_artifact_results(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge()
    request = image_request("a red fox", n=2).model_copy(
        update={"output": image_request().output.model_copy(update={"response_format": "b64_json"})}
    )
    job, created = await bridge.manager.submit(SCOPE, request, idempotency_key=None)
    assert created is True
    assert job.status is ImageJobStatus.QUEUED and job.progress is None
    assert job.request.output.response_format == "artifact"

    done = await bridge.settled(job.id)
    assert done.status is ImageJobStatus.SUCCEEDED
    assert done.progress is not None and done.progress.stage == "completed"
    assert done.started is not None and done.completed is not None and done.error is None
    assert done.result is not None and done.result.id == job.id
    assert [item.type for item in done.result.data] == ["artifact", "artifact"]
    for item in done.result.data:
        assert item.id is not None
        content = await bridge.app.artifacts.read(item.id, SCOPE)
        assert content is not None
        with pytest.raises(BridgeError):  # artifacts belong to the submitting scope
            await bridge.app.artifacts.read(item.id, OTHER_SCOPE)
    wire = done.to_wire()
    assert "idempotency_key" not in wire["request"]
    assert bridge.mock.calls == 2


async def test_failed_job_keeps_the_error_and_no_result(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge()
    job, _ = await bridge.manager.submit(SCOPE, image_request("[mock:fail=upstream] a fox"))
    done = await bridge.settled(job.id)
    assert done.status is ImageJobStatus.FAILED
    assert done.result is None
    assert done.error is not None and done.error.code is ErrorCode.UPSTREAM
    assert done.error.provider == "mock"


async def test_capability_errors_surface_in_the_job_not_at_submission(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge()
    request = image_request().model_copy(
        update={"routing": image_request().routing.model_copy(update={"model": "no-such-model"})}
    )
    job, _ = await bridge.manager.submit(SCOPE, request)
    done = await bridge.settled(job.id)
    assert done.status is ImageJobStatus.FAILED
    assert done.error is not None and done.error.code is ErrorCode.UNSUPPORTED_CAPABILITY


async def test_invalid_request_is_refused_before_anything_is_stored(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge("runtime.request.max_outputs=4")
    with pytest.raises(BridgeError) as caught:
        await bridge.manager.submit(SCOPE, image_request(n=5))
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.http_status == 422
    assert caught.value.details["issues"][0]["field"] == "parameters.n"
    with pytest.raises(BridgeError) as blank:
        await bridge.manager.submit(SCOPE, image_request("   "))
    assert blank.value.details["issues"][0]["field"] == "prompt"
    assert (await bridge.manager.statistics())["total"] == 0


async def test_configured_limits_allow_more_than_the_core_default(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge(start=False)
    job, created = await bridge.manager.submit(SCOPE, image_request(n=20))
    assert created and job.request.parameters.n == 20


async def test_submissions_before_start_wait_in_the_database(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(start=False)
    job, _ = await bridge.manager.submit(SCOPE, image_request())
    await asyncio.sleep(0.05)
    assert (await bridge.manager.get(SCOPE, job.id)).status is ImageJobStatus.QUEUED
    await bridge.manager.start()
    assert (await bridge.settled(job.id)).status is ImageJobStatus.SUCCEEDED


# -- cancellation ----------------------------------------------------------------------------


async def test_cancelling_a_queued_job_is_immediate_and_it_never_runs(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge(start=False)
    job, _ = await bridge.manager.submit(SCOPE, image_request())
    cancelled = await bridge.manager.cancel(SCOPE, job.id)
    assert cancelled.status is ImageJobStatus.CANCELLED
    assert cancelled.cancel_requested is True
    assert cancelled.completed is not None and cancelled.error is None
    await bridge.manager.start()
    await asyncio.sleep(0.05)
    assert bridge.mock.calls == 0
    assert (await bridge.manager.get(SCOPE, job.id)).status is ImageJobStatus.CANCELLED


async def test_cancelling_a_running_job_reaches_the_provider(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge()
    job, _ = await bridge.manager.submit(SCOPE, image_request(f"{SLOW} a slow fox"))
    await bridge.reached(job.id, running)
    flagged = await bridge.manager.cancel(SCOPE, job.id)
    assert flagged.status is ImageJobStatus.RUNNING and flagged.cancel_requested is True
    done = await bridge.settled(job.id)
    assert done.status is ImageJobStatus.CANCELLED
    assert done.error is not None and done.error.code is ErrorCode.CANCELLED
    assert bridge.mock.cancellations == 1
    assert bridge.manager.active_workers == 0


class FailingCancelStore(SqliteJobStore):
    """The real store whose cancellation write can be made to fail."""

    fail_cancel = False

    async def request_cancel(self, scope: str, job_id: str, *, now: int) -> Any:
        if self.fail_cancel:
            raise BridgeError(ErrorCode.INTERNAL, "durable job database is unavailable")
        return await super().request_cancel(scope, job_id, now=now)


async def test_cancellation_is_persisted_before_the_provider_is_signalled(
    make_bridge: BridgeFactory,
) -> None:
    """If the durable flag cannot be written the provider keeps running: a signal sent
    first would stop work whose record still says nothing about a cancel."""
    bridge = await make_bridge(store_class=FailingCancelStore)
    store = bridge.store
    assert isinstance(store, FailingCancelStore)
    job, _ = await bridge.manager.submit(SCOPE, image_request(f"{SLOW} a slow fox"))
    await bridge.reached(job.id, running)
    store.fail_cancel = True
    with pytest.raises(BridgeError) as caught:
        await bridge.manager.cancel(SCOPE, job.id)
    assert caught.value.code is ErrorCode.INTERNAL
    await asyncio.sleep(0.1)
    assert bridge.mock.cancellations == 0
    still = await bridge.manager.get(SCOPE, job.id)
    assert still.status is ImageJobStatus.RUNNING and still.cancel_requested is False
    store.fail_cancel = False
    assert (await bridge.manager.cancel(SCOPE, job.id)).cancel_requested is True
    assert (await bridge.settled(job.id)).status is ImageJobStatus.CANCELLED
    assert bridge.mock.cancellations == 1


async def test_cancelling_a_finished_job_changes_nothing(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge()
    job, _ = await bridge.manager.submit(SCOPE, image_request())
    done = await bridge.settled(job.id)
    again = await bridge.manager.cancel(SCOPE, job.id)
    assert again.status is ImageJobStatus.SUCCEEDED and again.cancel_requested is False
    assert again.updated == done.updated


# -- restart ---------------------------------------------------------------------------------


async def test_restart_interrupts_running_work_and_resumes_queued_work(
    make_bridge: BridgeFactory,
) -> None:
    first = await make_bridge(start=False)
    crashed, _ = await first.manager.submit(SCOPE, image_request("was running"))
    waiting, _ = await first.manager.submit(SCOPE, image_request("was queued"))
    # A worker of the first bridge had claimed this job when the process died.
    assert await first.store.claim(SCOPE, crashed.id, now=int(first.clock()))

    second = await make_bridge()
    interrupted = await second.manager.get(SCOPE, crashed.id)
    assert interrupted.status is ImageJobStatus.INTERRUPTED
    assert interrupted.error is not None
    assert interrupted.error.code is ErrorCode.CANCELLED and interrupted.error.retryable is False
    assert interrupted.error.details["recovery"] == "inspect_history_before_retrying"
    assert interrupted.progress is not None and interrupted.progress.stage == "starting"
    assert (await second.settled(waiting.id)).status is ImageJobStatus.SUCCEEDED
    assert second.mock.calls == 1  # the interrupted job is never re-run


async def test_restart_schedules_every_queued_job_oldest_first(
    make_bridge: BridgeFactory,
) -> None:
    first = await make_bridge(start=False, settings=JobManagerSettings(max_pending=10))
    ids = []
    for index in range(5):
        job, _ = await first.manager.submit(SCOPE, image_request(f"fox {index}"))
        ids.append(job.id)
        first.clock.advance(1)
    # The limit was lowered since, and they span three pages: all must run (the original
    # scheduled only max_pending of them on restart, the rest never).
    second = await make_bridge(
        settings=JobManagerSettings(max_pending=1, max_running=1),
        store_class=RecordingStore,
        queued_page=2,
    )
    for job_id in ids:
        assert (await second.settled(job_id)).status is ImageJobStatus.SUCCEEDED
    assert isinstance(second.store, RecordingStore)
    assert second.store.claims == ids


# -- idempotency -----------------------------------------------------------------------------


async def test_idempotent_replay_returns_the_same_job_even_with_a_full_queue(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge(start=False, settings=JobManagerSettings(max_pending=1))
    request = image_request("keyed fox")
    job, created = await bridge.manager.submit(SCOPE, request, idempotency_key="key-1")
    assert created
    replay, again = await bridge.manager.submit(
        SCOPE, request.model_copy(update={"timeout_ms": 5_000}), idempotency_key="key-1"
    )
    assert again is False and replay.id == job.id
    body_key, _ = await bridge.manager.submit(SCOPE, keyed(request, "key-1"))
    assert body_key.id == job.id
    both, _ = await bridge.manager.submit(SCOPE, keyed(request, "key-1"), idempotency_key="key-1")
    assert both.id == job.id
    with pytest.raises(BridgeError) as full:
        await bridge.manager.submit(SCOPE, request, idempotency_key="key-2")
    assert full.value.code is ErrorCode.OVERLOADED
    assert (await bridge.manager.statistics())["total"] == 1


async def test_concurrent_identical_submissions_converge_on_one_job(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge(start=False)
    results = await asyncio.gather(
        *(bridge.manager.submit(SCOPE, image_request(), idempotency_key="same") for _ in range(4))
    )
    assert len({job.id for job, _ in results}) == 1
    assert sorted(created for _, created in results) == [False, False, False, True]
    assert (await bridge.manager.statistics())["total"] == 1


async def test_replay_reports_the_current_state(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge()
    job, _ = await bridge.manager.submit(SCOPE, image_request(), idempotency_key="k")
    await bridge.settled(job.id)
    replay, created = await bridge.manager.submit(SCOPE, image_request(), idempotency_key="k")
    assert created is False and replay.status is ImageJobStatus.SUCCEEDED
    assert bridge.mock.calls == 1


async def test_same_key_with_another_request_conflicts(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(start=False)
    await bridge.manager.submit(SCOPE, image_request("one"), idempotency_key="key")
    with pytest.raises(BridgeError) as caught:
        await bridge.manager.submit(SCOPE, image_request("two"), idempotency_key="key")
    assert caught.value.code is ErrorCode.IDEMPOTENCY_CONFLICT
    assert caught.value.http_status == 409
    assert caught.value.message == "idempotency key was already used for a different request"


async def test_another_scope_reuses_a_key_independently(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(start=False)
    mine, _ = await bridge.manager.submit(SCOPE, image_request(), idempotency_key="key")
    theirs, created = await bridge.manager.submit(
        OTHER_SCOPE, image_request("other"), idempotency_key="key"
    )
    assert created and theirs.id != mine.id


async def test_header_and_body_keys_must_agree(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(start=False)
    with pytest.raises(BridgeError) as caught:
        await bridge.manager.submit(
            SCOPE, keyed(image_request(), "body-key"), idempotency_key="header-key"
        )
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.http_status == 422
    assert caught.value.field == "idempotency_key"
    # The same words as the HTTP routes use.
    assert caught.value.message == "Idempotency-Key conflicts with the request body"
    assert (await bridge.manager.statistics())["total"] == 0


# -- capacity --------------------------------------------------------------------------------


async def test_pending_capacity_refuses_without_persisting(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(start=False, settings=JobManagerSettings(max_pending=1))
    await bridge.manager.submit(SCOPE, image_request())
    with pytest.raises(BridgeError) as caught:
        await bridge.manager.submit(SCOPE, image_request("second"))
    error = caught.value
    assert error.code is ErrorCode.OVERLOADED and error.retryable is True
    assert error.http_status == 503 and error.message == "durable job queue is full"
    assert (await bridge.manager.statistics())["total"] == 1


async def test_database_budget_refuses_without_persisting(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(
        start=False, settings=JobManagerSettings(max_database_bytes=262_144, max_retained_bytes=1)
    )
    with pytest.raises(BridgeError) as caught:
        await bridge.manager.submit(SCOPE, image_request())
    assert caught.value.code is ErrorCode.OVERLOADED and caught.value.retryable
    assert (await bridge.manager.statistics())["total"] == 0


async def test_running_jobs_are_bounded_by_max_running(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(settings=JobManagerSettings(max_running=2))
    jobs = [
        (await bridge.manager.submit(SCOPE, image_request(f"{SLOW} fox {i}")))[0] for i in range(4)
    ]

    async def two_running() -> bool:
        stats = await bridge.manager.statistics()
        return bool(stats["running"] == 2)

    await eventually(two_running)
    await asyncio.sleep(0.05)
    stats = await bridge.manager.statistics()
    assert (stats["running"], stats["queued"], stats["active_workers"]) == (2, 2, 2)
    for job in jobs:
        await bridge.manager.cancel(SCOPE, job.id)
    for job in jobs:
        assert (await bridge.settled(job.id)).status is ImageJobStatus.CANCELLED
    assert bridge.mock.peak_in_flight == 2


async def test_submissions_are_refused_while_shutting_down(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge()
    await bridge.manager.shutdown(timeout_s=0)
    with pytest.raises(BridgeError) as caught:
        await bridge.manager.submit(SCOPE, image_request())
    assert caught.value.code is ErrorCode.OVERLOADED and caught.value.retryable
    assert await bridge.manager.healthy() is False


async def test_unhealthy_retention_refuses_submissions_until_it_recovers(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge(store_class=BrokenPruneStore)
    store = bridge.store
    assert isinstance(store, BrokenPruneStore)
    assert await bridge.manager.healthy() is True
    store.broken = True
    with pytest.raises(BridgeError):
        await bridge.manager.run_retention()
    assert await bridge.manager.healthy() is False
    with pytest.raises(BridgeError) as caught:
        await bridge.manager.submit(SCOPE, image_request())
    assert caught.value.code is ErrorCode.OVERLOADED and caught.value.retryable
    store.broken = False
    assert await bridge.manager.run_retention() == 0
    _, created = await bridge.manager.submit(SCOPE, image_request())
    assert created and await bridge.manager.healthy()


async def test_the_retention_loop_runs_on_its_own_and_reports_failures(
    make_bridge: BridgeFactory,
) -> None:
    # retention 2 s → the loop runs every second (the shortest period allowed).
    bridge = await make_bridge(
        settings=JobManagerSettings(retention_secs=2), store_class=BrokenPruneStore
    )
    assert isinstance(bridge.store, BrokenPruneStore)
    bridge.store.broken = True

    async def unhealthy() -> bool:
        return not await bridge.manager.healthy()

    await eventually(unhealthy, timeout=5)
    bridge.store.broken = False
    await eventually(bridge.manager.healthy, timeout=5)


# -- scopes ----------------------------------------------------------------------------------


async def test_other_scopes_cannot_see_or_touch_a_job(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge()
    job, _ = await bridge.manager.submit(
        SCOPE, image_request("[mock:latency=1200] preview fox", size="64x64", partial_images=3)
    )
    await eventually(lambda: _has_preview(bridge, job.id))
    assert bridge.manager.partial(OTHER_SCOPE, job.id) is None
    for operation in (
        bridge.manager.get(OTHER_SCOPE, job.id),
        bridge.manager.cancel(OTHER_SCOPE, job.id),
        bridge.manager.update(OTHER_SCOPE, job.id, ImageJobUpdate(favorite=True)),
    ):
        with pytest.raises(BridgeError) as caught:
            await operation
        assert caught.value.http_status == 404
        assert caught.value.message == "durable job was not found"
        assert caught.value.details["resource"] == "job"
    assert (await bridge.manager.list(OTHER_SCOPE)).items == []
    mine = await bridge.manager.get(SCOPE, job.id)
    assert mine.cancel_requested is False and mine.favorite is False


async def test_unknown_and_malformed_ids_are_not_found(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge()
    for job_id in ("01900000-0000-7000-8000-000000000000", "not-a-uuid", ""):
        with pytest.raises(BridgeError) as caught:
            await bridge.manager.get(SCOPE, job_id)
        assert caught.value.http_status == 404
        assert bridge.manager.partial(SCOPE, job_id) is None


# -- progress and previews -------------------------------------------------------------------


async def _has_preview(bridge: Any, job_id: str) -> bool:
    return bool(bridge.manager.partial(SCOPE, job_id) is not None)


async def test_partial_previews_exist_only_while_the_job_runs(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge()
    job, _ = await bridge.manager.submit(
        SCOPE, image_request("[mock:latency=1200] preview fox", size="64x64", partial_images=2)
    )
    await eventually(lambda: _has_preview(bridge, job.id))
    preview = bridge.manager.partial(SCOPE, job.id)
    assert preview is not None
    assert preview.media_type == "image/png"
    assert preview.output_index == 0 and preview.partial_index in (0, 1)
    with Image.open(io.BytesIO(preview.data)) as image:
        assert image.size == (8, 8)
    assert (await bridge.manager.get(SCOPE, job.id)).status is ImageJobStatus.RUNNING

    done = await bridge.settled(job.id)
    assert done.status is ImageJobStatus.SUCCEEDED
    assert done.progress is not None and done.progress.partial_images == 2
    assert bridge.manager.partial(SCOPE, job.id) is None


async def test_an_invalid_preview_is_ignored_and_never_fails_the_job(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge(providers=[BadPreviewMock()])
    job, _ = await bridge.manager.submit(SCOPE, image_request())
    done = await bridge.settled(job.id)
    assert done.status is ImageJobStatus.SUCCEEDED
    assert done.progress is not None and done.progress.partial_images == 1


async def test_progress_follows_provider_events_in_order(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(store_class=RecordingStore)
    job, _ = await bridge.manager.submit(
        SCOPE, image_request("[mock:latency=60] staged fox", partial_images=1)
    )
    done = await bridge.settled(job.id)
    assert isinstance(bridge.store, RecordingStore)
    # Events that arrive together are written once, with the latest stage.
    written = bridge.store.stages
    expected = [
        ("provider", 0),
        ("provider_progress", 0),
        ("partial_image", 1),
        ("materializing", 1),
    ]
    assert written[-1] == ("materializing", 1)
    assert written == [stage for stage in expected if stage in written]
    assert ("provider_progress", 0) in written
    assert done.progress is not None and done.progress.stage == "completed"


async def test_a_burst_of_previews_is_recorded_once_with_the_full_count(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge(store_class=RecordingStore, providers=[BurstPreviewMock()])
    job, _ = await bridge.manager.submit(SCOPE, image_request())
    done = await bridge.settled(job.id)
    assert done.progress is not None and done.progress.partial_images == 3
    assert isinstance(bridge.store, RecordingStore)
    # The mock's own started/progress events follow the burst: 5 events, fewer writes.
    assert bridge.store.stages[-1] == ("materializing", 3)
    assert len(bridge.store.stages) < 5


def test_event_stage_mapping() -> None:
    response = ImageResponse.model_validate(
        {
            "id": "r",
            "created": 1,
            "provider": "mock",
            "model": "m",
            "requested": {},
            "effective": {},
        }
    )
    assert progress_stage(ProgressEvent(stage="x")) == "provider_progress"
    assert progress_stage(CompletedEvent(response=response)) == "materializing"


# -- results ---------------------------------------------------------------------------------


async def test_an_oversized_result_is_stored_trimmed(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(max_result_bytes=3_000)
    job, _ = await bridge.manager.submit(SCOPE, image_request("fox " * 1_000))
    done = await bridge.settled(job.id)
    assert done.status is ImageJobStatus.SUCCEEDED
    assert done.result is not None
    assert TRIMMED_WARNING in done.result.warnings
    assert done.result.revised_prompt is None and done.result.usage is None
    item = done.result.data[0]
    assert item.type == "artifact" and item.id is not None and item.name is not None
    content = await bridge.app.artifacts.read(item.id, SCOPE)
    assert content.info.sha256 == item.sha256


async def test_a_result_that_cannot_fit_fails_the_job(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(max_result_bytes=100)
    job, _ = await bridge.manager.submit(SCOPE, image_request())
    done = await bridge.settled(job.id)
    assert done.status is ImageJobStatus.FAILED
    assert done.error is not None and done.error.code is ErrorCode.ARTIFACT


# -- shutdown --------------------------------------------------------------------------------


async def test_shutdown_waits_for_running_jobs_within_the_timeout(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge()
    job, _ = await bridge.manager.submit(SCOPE, image_request("[mock:latency=200] fox"))
    await bridge.reached(job.id, running)
    await bridge.manager.shutdown(timeout_s=10)
    record = await bridge.store.get(SCOPE, job.id)
    assert record.status is ImageJobStatus.SUCCEEDED


async def test_shutdown_interrupts_late_jobs_and_leaves_queued_ones(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge(settings=JobManagerSettings(max_running=1))
    slow, _ = await bridge.manager.submit(SCOPE, image_request(f"{SLOW} fox"))
    queued, _ = await bridge.manager.submit(SCOPE, image_request("queued fox"))
    await bridge.reached(slow.id, running)
    await bridge.manager.shutdown(timeout_s=0)
    interrupted = await bridge.manager.get(SCOPE, slow.id)
    assert interrupted.status is ImageJobStatus.INTERRUPTED
    assert interrupted.error is not None
    assert interrupted.error.details["recovery"] == "inspect_history_before_retrying"
    assert (await bridge.manager.get(SCOPE, queued.id)).status is ImageJobStatus.QUEUED
    assert bridge.manager.active_workers == 0


# -- history ---------------------------------------------------------------------------------


async def test_history_updates_follow_the_rules(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(start=False)
    job, _ = await bridge.manager.submit(SCOPE, image_request())
    with pytest.raises(BridgeError) as empty:
        await bridge.manager.update(SCOPE, job.id, ImageJobUpdate())
    assert empty.value.message == "history update must change favorite or deleted state"
    assert empty.value.http_status == 422
    for deleted in (True, False):
        with pytest.raises(BridgeError) as active:
            await bridge.manager.update(SCOPE, job.id, ImageJobUpdate(deleted=deleted))
        assert active.value.field == "deleted" and active.value.http_status == 422
    favorite = await bridge.manager.update(SCOPE, job.id, ImageJobUpdate(favorite=True))
    assert favorite.favorite is True and favorite.status is ImageJobStatus.QUEUED

    bridge.clock.advance(5)
    await bridge.manager.cancel(SCOPE, job.id)
    bridge.clock.advance(5)
    hidden = await bridge.manager.update(SCOPE, job.id, ImageJobUpdate(deleted=True))
    assert hidden.deleted == int(bridge.clock()) and hidden.updated == int(bridge.clock())
    assert (await bridge.manager.list(SCOPE)).items == []
    assert [i.id for i in (await bridge.manager.list(SCOPE, visibility="hidden")).items] == [job.id]
    restored = await bridge.manager.update(SCOPE, job.id, ImageJobUpdate(deleted=False))
    assert restored.deleted is None
    assert [i.id for i in (await bridge.manager.list(SCOPE)).items] == [job.id]


async def test_retention_prunes_old_history_but_keeps_favourites(
    make_bridge: BridgeFactory,
) -> None:
    bridge = await make_bridge(settings=JobManagerSettings(retention_secs=100))
    kept, _ = await bridge.manager.submit(SCOPE, image_request("favourite"))
    dropped, _ = await bridge.manager.submit(SCOPE, image_request("ordinary"))
    await bridge.settled(kept.id)
    await bridge.settled(dropped.id)
    await bridge.manager.update(SCOPE, kept.id, ImageJobUpdate(favorite=True))
    assert await bridge.manager.run_retention() == 0
    bridge.clock.advance(101)
    assert await bridge.manager.run_retention() == 1
    assert (await bridge.manager.get(SCOPE, kept.id)).favorite is True
    with pytest.raises(BridgeError) as caught:
        await bridge.manager.get(SCOPE, dropped.id)
    assert caught.value.http_status == 404


async def test_finished_jobs_beyond_max_retained_are_pruned(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(settings=JobManagerSettings(max_retained=1))
    first, _ = await bridge.manager.submit(SCOPE, image_request("first"))
    await bridge.settled(first.id)
    bridge.clock.advance(1)
    second, _ = await bridge.manager.submit(SCOPE, image_request("second"))
    await bridge.settled(second.id)

    async def one_left() -> bool:
        stats = await bridge.manager.statistics()
        return bool(stats["total"] == 1)

    await eventually(one_left)  # pruning follows every finished job
    assert [i.id for i in (await bridge.manager.list(SCOPE)).items] == [second.id]


async def test_finished_jobs_beyond_the_retained_byte_budget_are_pruned(
    make_bridge: BridgeFactory,
) -> None:
    first = await make_bridge()
    old, _ = await first.manager.submit(SCOPE, image_request("older"))
    await first.settled(old.id)
    size = (await first.store.get(SCOPE, old.id)).logical_bytes
    await first.manager.shutdown(timeout_s=0)

    # Room for one finished job of this size, not two: the older one goes.
    second = await make_bridge(settings=JobManagerSettings(max_retained_bytes=size + size // 2))
    new, _ = await second.manager.submit(SCOPE, image_request("newer"))
    await second.settled(new.id)

    async def one_left() -> bool:
        stats = await second.manager.statistics()
        return bool(stats["total"] == 1)

    await eventually(one_left)
    assert [i.id for i in (await second.manager.list(SCOPE)).items] == [new.id]


def _ids(page: Any) -> list[str]:
    return [item.id for item in page.items]


async def test_history_filters_apply_before_the_cursor(make_bridge: BridgeFactory) -> None:
    bridge = await make_bridge(start=False)
    manager = bridge.manager
    prompts = ["100% Red fox", "blue_bird", "Červená liška", "plain fox", "blue bird"]
    ids = []
    for prompt in prompts:
        job, _ = await manager.submit(SCOPE, image_request(prompt))
        ids.append(job.id)
        bridge.clock.advance(1)
    newest_first = ids[::-1]
    assert _ids(await manager.list(SCOPE)) == newest_first

    page = await manager.list(SCOPE, limit=2)
    assert _ids(page) == newest_first[:2] and page.next_cursor is not None
    rest = await manager.list(SCOPE, limit=2, cursor=page.next_cursor)
    assert _ids(rest) == newest_first[2:4]
    last = await manager.list(SCOPE, limit=2, cursor=rest.next_cursor)
    assert _ids(last) == newest_first[4:] and last.next_cursor is None

    assert _ids(await manager.list(SCOPE, search="100%")) == [ids[0]]
    assert _ids(await manager.list(SCOPE, search="blue_")) == [ids[1]]
    assert _ids(await manager.list(SCOPE, search="  ČERVENÁ ")) == [ids[2]]
    assert _ids(await manager.list(SCOPE, search="' OR 1=1 --")) == []
    assert _ids(await manager.list(SCOPE, search="   ")) == newest_first

    for job_id in (ids[0], ids[3]):
        await manager.update(SCOPE, job_id, ImageJobUpdate(favorite=True))
    favourites = await manager.list(SCOPE, favorite=True, limit=1)
    assert _ids(favourites) == [ids[3]]
    after = await manager.list(SCOPE, favorite=True, limit=1, cursor=favourites.next_cursor)
    assert _ids(after) == [ids[0]] and after.next_cursor is None
    assert _ids(await manager.list(SCOPE, favorite=False)) == [ids[4], ids[2], ids[1]]

    await manager.cancel(SCOPE, ids[1])
    await manager.update(SCOPE, ids[1], ImageJobUpdate(deleted=True))
    assert _ids(await manager.list(SCOPE, status="cancelled")) == []
    assert _ids(await manager.list(SCOPE, status="cancelled", visibility="all")) == [ids[1]]
    assert _ids(await manager.list(SCOPE, status="queued")) == [ids[4], ids[3], ids[2], ids[0]]
    assert _ids(await manager.list(SCOPE, visibility="hidden")) == [ids[1]]
    assert _ids(await manager.list(SCOPE, include_deleted=True)) == newest_first
    assert _ids(await manager.list(SCOPE, include_deleted=False)) == [
        ids[4],
        ids[3],
        ids[2],
        ids[0],
    ]
    # As in the original: only include_deleted=true conflicts with an explicit visibility.
    assert _ids(await manager.list(SCOPE, include_deleted=False, visibility="hidden")) == [ids[1]]


@pytest.mark.parametrize(
    ("query", "message", "field"),
    [
        ({"limit": 0}, "job page limit must be between 1 and 100", "limit"),
        ({"limit": 101}, "job page limit must be between 1 and 100", "limit"),
        ({"status": "finished"}, "job query parameters are invalid", "status"),
        ({"visibility": "deleted"}, "job query parameters are invalid", "visibility"),
        ({"cursor": "not a cursor"}, "job cursor is malformed", "cursor"),
        (
            {"include_deleted": True, "visibility": "active"},
            "include_deleted cannot be combined with visibility",
            "include_deleted",
        ),
        (
            {"search": "x" * 513},
            "search must be at most 512 bytes without control characters",
            "search",
        ),
        (
            {"search": "fox\nbird"},
            "search must be at most 512 bytes without control characters",
            "search",
        ),
    ],
)
async def test_bad_history_queries_are_refused(
    make_bridge: BridgeFactory, query: dict[str, Any], message: str, field: str
) -> None:
    bridge = await make_bridge(start=False)
    with pytest.raises(BridgeError) as caught:
        await bridge.manager.list(SCOPE, **query)
    assert caught.value.code is ErrorCode.INVALID_REQUEST and caught.value.http_status == 422
    assert caught.value.message == message
    assert caught.value.field == field


async def test_statistics_report_counts_and_bounds(make_bridge: BridgeFactory) -> None:
    settings = JobManagerSettings(max_pending=7, max_running=3, retention_secs=60)
    bridge = await make_bridge(settings=settings)
    job, _ = await bridge.manager.submit(SCOPE, image_request())
    await bridge.settled(job.id)
    stats = await bridge.manager.statistics()
    assert stats["total"] == stats["succeeded"] == 1
    assert stats["queued"] == stats["running"] == stats["failed"] == 0
    assert (stats["max_pending"], stats["max_running"], stats["retention_secs"]) == (7, 3, 60)
    assert stats["database_bytes"] > 0 and stats["logical_bytes"] > 0
    assert stats["active_workers"] == 0
    assert set(stats) == {
        "total",
        "queued",
        "running",
        "succeeded",
        "failed",
        "cancelled",
        "interrupted",
        "hidden",
        "database_bytes",
        "logical_bytes",
        "active_workers",
        "max_pending",
        "max_running",
        "retention_secs",
        "max_retained",
        "max_retained_bytes",
        "max_database_bytes",
    }  # exactly the original's keys: its SDK refuses any other
    queue = await bridge.manager.queue_statistics()
    assert set(queue) == {"shared", "instance_id", "leases", "queued_by_provider"}
    # A single SQLite instance: no leases, nothing queued, its own generated name.
    assert (queue["shared"], queue["leases"], queue["queued_by_provider"]) == (False, {}, {})
    assert queue["instance_id"] == bridge.manager.instance_id


@pytest.mark.usefixtures("fresh_storage_health")
async def test_an_outcome_row_refused_by_a_full_database_is_written_when_space_returns(
    make_bridge: BridgeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk between a job's images and its outcome row leaves no row ``running``:
    the write is retried and lands once there is room, without a restart."""
    from imagebridge.engine.storage_faults import disk_fault

    bridge = await make_bridge()
    full = {"refused": 0, "on": True}
    real = bridge.store.succeed

    async def succeed(*args: Any, **kwargs: Any) -> Any:
        if full["on"]:
            full["refused"] += 1
            raise disk_fault(
                ErrorCode.INTERNAL,
                "durable job database could not be written",
                "no_space",
                "database",
                retryable=True,
            )
        return await real(*args, **kwargs)

    monkeypatch.setattr(bridge.store, "succeed", succeed)
    job, _ = await bridge.manager.submit(SCOPE, image_request("a full disk"), idempotency_key=None)
    await eventually(lambda: _true_after(full["refused"] >= 2))
    assert (await bridge.manager.get(SCOPE, job.id)).status is ImageJobStatus.RUNNING

    full["on"] = False  # space is back
    done = await bridge.settled(job.id)
    assert done.status is ImageJobStatus.SUCCEEDED
    assert done.result is not None and done.result.data[0].type == "artifact"


async def _true_after(value: bool) -> bool:
    return value
