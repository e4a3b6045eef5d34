"""``client.jobs`` against a real bridge: the whole durable-job lifecycle, sync and async."""

from __future__ import annotations

import uuid

import pytest

from imagebridge.client import BridgeAPIError, ErrorCode, _base_client
from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.jobs import ImageJob
from tests.client.conftest import Client, collect, resolve

SMALL = {"size": "16x16"}


def job_body(prompt: str, **parameters: object) -> dict[str, object]:
    return {"prompt": prompt, "parameters": {**SMALL, **parameters}}


async def test_create_wait_and_read_the_result(api: Client) -> None:
    created = await resolve(api.jobs.create(job_body("JOBS SDK fox")))
    assert isinstance(created, ImageJob)
    assert created.status in (ImageJobStatus.QUEUED, ImageJobStatus.RUNNING)
    assert created.request.output.response_format.value == "artifact"
    final = await resolve(api.jobs.wait(created.id, timeout=20, poll_interval=0.02))
    assert final.status is ImageJobStatus.SUCCEEDED
    assert final.result is not None
    assert final.result.id == created.id
    item = final.result.data[0]
    assert item.type == "artifact" and item.id is not None
    fetched = await resolve(api.jobs.get(created.id))
    assert fetched.result == final.result


async def test_create_accepts_a_prompt_string(api: Client) -> None:
    created = await resolve(api.jobs.create("JOBS SDK plain prompt"))
    assert created.request.prompt == "JOBS SDK plain prompt"


async def test_job_idempotency_replays_and_conflicts(api: Client) -> None:
    key = f"job-{uuid.uuid4()}"
    first = await resolve(api.jobs.create(job_body("JOBS SDK same"), idempotency_key=key))
    again = await resolve(api.jobs.create(job_body("JOBS SDK same"), idempotency_key=key))
    assert again.id == first.id
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.jobs.create(job_body("JOBS SDK other"), idempotency_key=key))
    assert caught.value.status_code == 409
    assert caught.value.code is ErrorCode.IDEMPOTENCY_CONFLICT


async def test_list_iter_and_filters(api: Client) -> None:
    marker = f"LISTING-{uuid.uuid4().hex[:8]}"
    ids = []
    for index in range(3):
        job = await resolve(api.jobs.create(job_body(f"{marker} {index}")))
        ids.append(job.id)
    for job_id in ids:
        await resolve(api.jobs.wait(job_id, timeout=20, poll_interval=0.02))
    page = await resolve(api.jobs.list(limit=2, search=marker))
    assert len(page.items) == 2
    assert page.next_cursor is not None
    assert not hasattr(page.items[0], "request")
    every = await collect(api.jobs.iter(page_size=1, search=marker))
    assert [item.id for item in every] == list(reversed(ids))  # newest first
    succeeded = await collect(api.jobs.iter(search=marker, status="succeeded"))
    assert len(succeeded) == 3


async def test_synchronous_requests_are_in_the_history_and_origin_filters_them(
    api: Client,
) -> None:
    marker = f"ORIGIN-{uuid.uuid4().hex[:8]}"
    job = await resolve(api.jobs.create(job_body(f"{marker} queued")))
    await resolve(api.jobs.wait(job.id, timeout=20, poll_interval=0.02))
    await resolve(api.images.generate(job_body(f"{marker} synchronous")))
    both = await resolve(api.jobs.list(search=marker))
    assert len(both.items) == 2
    synchronous = await resolve(api.jobs.list(search=marker, origin="sync"))
    [record] = synchronous.items
    assert record.id != job.id
    # its image is kept just after the answer went out; then the record is finished
    kept = await resolve(api.jobs.wait(record.id, timeout=20, poll_interval=0.02))
    assert kept.status is ImageJobStatus.SUCCEEDED
    assert kept.result is not None and kept.result.data[0].type == "artifact"
    jobs_only = await collect(api.jobs.iter(search=marker, origin="job"))
    assert [item.id for item in jobs_only] == [job.id]


async def test_update_hides_restores_and_favourites(api: Client) -> None:
    marker = f"HISTORY-{uuid.uuid4().hex[:8]}"
    job = await resolve(api.jobs.create(job_body(marker)))
    await resolve(api.jobs.wait(job.id, timeout=20, poll_interval=0.02))
    updated = await resolve(api.jobs.update(job.id, favorite=True, deleted=True))
    assert updated.favorite is True and updated.deleted is not None
    assert await collect(api.jobs.iter(search=marker)) == []
    hidden = await collect(api.jobs.iter(search=marker, visibility="hidden", favorite=True))
    assert [item.id for item in hidden] == [job.id]
    restored = await resolve(api.jobs.update(job.id, deleted=False))
    assert restored.deleted is None
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.jobs.update(job.id))
    assert caught.value.status_code == 422


async def test_cancel_a_queued_job(api: Client) -> None:
    slow = [
        await resolve(api.jobs.create(job_body(f"[mock:latency=1500] CANCEL {index}")))
        for index in range(3)
    ]
    cancelled = await resolve(api.jobs.cancel(slow[-1].id))  # max_running=2: the last waits
    assert cancelled.cancel_requested is True
    assert cancelled.status is ImageJobStatus.CANCELLED
    for job in slow[:-1]:
        await resolve(api.jobs.cancel(job.id))


async def test_partial_preview_while_running_and_none_after(api: Client) -> None:
    job = await resolve(
        api.jobs.create(job_body("[mock:latency=600] PARTIAL", size="64x64", partial_images=2))
    )
    preview = None
    for _ in range(300):
        preview = await resolve(api.jobs.partial(job.id))
        if preview is not None:
            break
        await _base_client.async_sleep(0.01)
    assert preview is not None
    assert preview.media_type == "image/png"
    assert preview.output_index == 0
    assert preview.partial_index in (0, 1)
    assert preview.data.startswith(b"\x89PNG")
    final = await resolve(api.jobs.wait(job.id, timeout=20, poll_interval=0.05))
    assert final.status is ImageJobStatus.SUCCEEDED
    assert await resolve(api.jobs.partial(job.id)) is None
    assert await resolve(api.jobs.partial(str(uuid.UUID(int=5)))) is None


async def test_wait_times_out_with_a_retryable_timeout(api: Client) -> None:
    job = await resolve(api.jobs.create(job_body("[mock:latency=2000] WAITING")))
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.jobs.wait(job.id, timeout=0.2, poll_interval=0.05))
    error = caught.value
    assert error.code is ErrorCode.TIMEOUT
    assert error.retryable is True
    assert error.details["job_id"] == job.id
    await resolve(api.jobs.cancel(job.id))


@pytest.fixture
def poll_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record every wait of ``jobs.wait`` (and still wait, so the job can progress)."""
    recorded: list[float] = []
    real_sleep, real_async_sleep = _base_client.sleep, _base_client.async_sleep

    def sleep(seconds: float) -> None:
        recorded.append(seconds)
        real_sleep(seconds)

    async def async_sleep(seconds: float) -> None:
        recorded.append(seconds)
        await real_async_sleep(seconds)

    monkeypatch.setattr(_base_client, "sleep", sleep)
    monkeypatch.setattr(_base_client, "async_sleep", async_sleep)
    return recorded


async def test_wait_backs_off_between_polls(api: Client, poll_waits: list[float]) -> None:
    # long enough for three polls even when each poll takes a few hundred ms (a busy CI)
    job = await resolve(api.jobs.create(job_body("[mock:latency=1500] BACKOFF")))
    final = await resolve(
        api.jobs.wait(job.id, timeout=20, poll_interval=0.02, max_poll_interval=0.05)
    )
    assert final.status is ImageJobStatus.SUCCEEDED
    assert len(poll_waits) >= 3
    assert poll_waits[0] == pytest.approx(0.02)
    assert poll_waits[1] == pytest.approx(0.03)
    assert max(poll_waits) <= 0.05 + 1e-9


async def test_bad_wait_arguments_fail_locally(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.jobs.wait("anything", timeout=0))
    assert caught.value.field == "timeout"
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.jobs.get(""))
    assert caught.value.field == "job_id"
