"""``client.jobs``: durable jobs — create, inspect, list, cancel, wait."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Iterator

from pydantic import ValidationError

from imagebridge.client import _base_client
from imagebridge.client._config import TimeoutTypes
from imagebridge.client._constants import IDEMPOTENCY_HEADER, MAX_PAGES
from imagebridge.client._exceptions import BridgeAPIError, error_from_response, protocol_error
from imagebridge.client._models import JobPartial
from imagebridge.client._params import (
    RequestLike,
    call_timeout,
    image_request,
    json_bytes,
    query,
)
from imagebridge.client._request import (
    RawResponse,
    RequestSpec,
    check_idempotency_key,
    model_parser,
    path_segment,
)
from imagebridge.client._resource import AsyncAPIResource, SyncAPIResource
from imagebridge.client.resources.images import request_operation
from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.envelope import ErrorEnvelope
from imagebridge.contract.errors import ErrorCode
from imagebridge.contract.jobs import ImageJob, ImageJobPage, ImageJobSummary, ImageJobUpdate

__all__ = ["AsyncJobs", "Jobs", "WaitPolicy"]

_IMAGE_MEDIA = frozenset({"image/png", "image/jpeg", "image/webp"})
DEFAULT_WAIT_TIMEOUT = 1800.0
DEFAULT_POLL_INTERVAL = 1.0
DEFAULT_MAX_POLL_INTERVAL = 10.0
POLL_BACKOFF = 1.5


def create_spec(
    request: RequestLike,
    *,
    idempotency_key: str | None,
    request_id: str | None,
    timeout: TimeoutTypes | None,
) -> RequestSpec[ImageJob]:
    model = image_request(request, request_operation(request), "jobs.create")
    headers = {}
    if idempotency_key is not None:
        headers[IDEMPOTENCY_HEADER] = check_idempotency_key(idempotency_key)
    return RequestSpec(
        "POST",
        "/v1/jobs",
        model_parser(ImageJob, "job"),
        json_body=json_bytes(model),
        headers=headers,
        expected=frozenset({202}),
        auto_idempotency=True,
        body_has_idempotency_key=model.idempotency_key is not None,
        request_id=request_id,
        timeout=call_timeout(timeout),
    )


def get_spec(job_id: str, request_id: str | None) -> RequestSpec[ImageJob]:
    return RequestSpec(
        "GET",
        f"/v1/jobs/{path_segment(job_id, 'job_id')}",
        model_parser(ImageJob, "job"),
        request_id=request_id,
    )


def list_spec(
    *,
    limit: int | None,
    cursor: str | None,
    status: ImageJobStatus | str | None,
    visibility: str | None,
    favorite: bool | None,
    search: str | None,
    request_id: str | None,
    origin: str | None = None,
) -> RequestSpec[ImageJobPage]:
    params = query(
        limit=limit,
        cursor=cursor,
        status=None if status is None else str(status),
        visibility=visibility,
        favorite=favorite,
        search=search,
        origin=origin,
    )
    return RequestSpec(
        "GET",
        "/v1/jobs",
        model_parser(ImageJobPage, "job page"),
        params=params,
        request_id=request_id,
    )


def cancel_spec(job_id: str, request_id: str | None) -> RequestSpec[ImageJob]:
    return RequestSpec(
        "DELETE",
        f"/v1/jobs/{path_segment(job_id, 'job_id')}",
        model_parser(ImageJob, "job"),
        request_id=request_id,
    )


def update_spec(
    job_id: str, favorite: bool | None, deleted: bool | None, request_id: str | None
) -> RequestSpec[ImageJob]:
    body = ImageJobUpdate(favorite=favorite, deleted=deleted)
    return RequestSpec(
        "PATCH",
        f"/v1/jobs/{path_segment(job_id, 'job_id')}",
        model_parser(ImageJob, "job"),
        json_body=json_bytes(body),
        request_id=request_id,
    )


def _partial(raw: RawResponse) -> JobPartial | None:
    if raw.status_code == 404:
        try:
            envelope = ErrorEnvelope.model_validate_json(raw.content)
        except (ValidationError, ValueError):
            envelope = None
        if envelope is not None and envelope.error.imagegen_bridge.details.get("resource") == "job":
            return None  # no preview right now (or no such job: the bridge does not say)
        raise error_from_response(404, raw.headers, raw.content, safe=True)
    media = raw.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media not in _IMAGE_MEDIA:
        raise protocol_error(
            "the bridge sent a partial preview that is not an image",
            status_code=raw.status_code,
            headers=raw.headers,
        )
    return JobPartial(
        data=raw.content,
        media_type=media,
        output_index=_int_header(raw, "x-image-output-index"),
        partial_index=_int_header(raw, "x-image-partial-index"),
    )


def _int_header(raw: RawResponse, name: str) -> int | None:
    value = raw.headers.get(name)
    return int(value) if value is not None and value.isdigit() and len(value) <= 6 else None


def partial_spec(job_id: str, request_id: str | None) -> RequestSpec[JobPartial | None]:
    return RequestSpec(
        "GET",
        f"/v1/jobs/{path_segment(job_id, 'job_id')}/partial",
        _partial,
        expected=frozenset({200, 404}),
        request_id=request_id,
    )


class WaitPolicy:
    """Polling schedule of :meth:`Jobs.wait`: start fast, back off to ``max_interval``."""

    def __init__(self, timeout: float, interval: float, max_interval: float) -> None:
        for name, value in (
            ("timeout", timeout),
            ("poll_interval", interval),
            ("max_poll_interval", max_interval),
        ):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise BridgeAPIError(
                    ErrorCode.INVALID_REQUEST,
                    f"{name} must be a positive, finite number of seconds",
                    details={"field": name},
                )
        self.deadline = time.monotonic() + timeout
        self.interval = min(interval, max_interval)
        self.max_interval = max_interval

    def next_sleep(self, job: ImageJob) -> float:
        """Seconds to wait before the next poll; raises ``timeout`` when the wait is over."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise BridgeAPIError(
                ErrorCode.TIMEOUT,
                "the job did not reach a final status before the wait timed out",
                retryable=True,
                details={"job_id": job.id, "status": job.status.value},
                suggestions=["Wait again with a longer timeout; the job keeps running."],
            )
        delay = min(self.interval, remaining)
        self.interval = min(self.interval * POLL_BACKOFF, self.max_interval)
        return delay


def _check_page(seen: set[str], cursor: str | None) -> str | None:
    if cursor is not None:
        if cursor in seen or len(seen) >= MAX_PAGES:
            raise protocol_error("the bridge's job pages do not end", cursor_pages=len(seen))
        seen.add(cursor)
    return cursor


class Jobs(SyncAPIResource):
    def create(
        self,
        request: RequestLike,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
    ) -> ImageJob:
        """``POST /v1/jobs`` (202): the queued job; its result stays on the bridge."""
        spec = create_spec(
            request, idempotency_key=idempotency_key, request_id=request_id, timeout=timeout
        )
        return self._transport.execute(spec)

    def get(self, job_id: str, *, request_id: str | None = None) -> ImageJob:
        return self._transport.execute(get_spec(job_id, request_id))

    def list(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        status: ImageJobStatus | str | None = None,
        visibility: str | None = None,
        favorite: bool | None = None,
        search: str | None = None,
        request_id: str | None = None,
        origin: str | None = None,
    ) -> ImageJobPage:
        """One page of job summaries, newest first. The history holds synchronous
        requests' records too; ``origin`` keeps one surface's (``job``, ``sync``,
        ``stream``, ``openai``)."""
        spec = list_spec(
            limit=limit,
            cursor=cursor,
            status=status,
            visibility=visibility,
            favorite=favorite,
            search=search,
            request_id=request_id,
            origin=origin,
        )
        return self._transport.execute(spec)

    def iter(
        self,
        *,
        page_size: int = 100,
        status: ImageJobStatus | str | None = None,
        visibility: str | None = None,
        favorite: bool | None = None,
        search: str | None = None,
        origin: str | None = None,
    ) -> Iterator[ImageJobSummary]:
        """Every matching job summary, following ``next_cursor`` page by page."""
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            page = self.list(
                limit=page_size,
                cursor=cursor,
                status=status,
                visibility=visibility,
                favorite=favorite,
                search=search,
                origin=origin,
            )
            yield from page.items
            cursor = _check_page(seen, page.next_cursor)
            if cursor is None:
                return

    def cancel(self, job_id: str, *, request_id: str | None = None) -> ImageJob:
        """``DELETE /v1/jobs/{id}``: a queued job is cancelled at once, a running one flagged."""
        return self._transport.execute(cancel_spec(job_id, request_id))

    def update(
        self,
        job_id: str,
        *,
        favorite: bool | None = None,
        deleted: bool | None = None,
        request_id: str | None = None,
    ) -> ImageJob:
        """``PATCH /v1/jobs/{id}``: favourite, soft-delete or restore a job."""
        return self._transport.execute(update_spec(job_id, favorite, deleted, request_id))

    def partial(self, job_id: str, *, request_id: str | None = None) -> JobPartial | None:
        """The latest partial preview of a running job, or ``None`` when there is none."""
        return self._transport.execute(partial_spec(job_id, request_id))

    def wait(
        self,
        job_id: str,
        *,
        timeout: float = DEFAULT_WAIT_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        max_poll_interval: float = DEFAULT_MAX_POLL_INTERVAL,
    ) -> ImageJob:
        """Poll until the job is final (succeeded, failed, cancelled, interrupted).

        Returns the final job whatever its status; raises ``timeout`` (retryable) when
        ``timeout`` seconds pass first. Polls start at ``poll_interval`` and back off.
        """
        policy = WaitPolicy(timeout, poll_interval, max_poll_interval)
        while True:
            job = self.get(job_id)
            if job.status.terminal:
                return job
            _base_client.sleep(policy.next_sleep(job))


class AsyncJobs(AsyncAPIResource):
    async def create(
        self,
        request: RequestLike,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
    ) -> ImageJob:
        spec = await asyncio.to_thread(
            create_spec,
            request,
            idempotency_key=idempotency_key,
            request_id=request_id,
            timeout=timeout,
        )
        return await self._transport.execute(spec)

    async def get(self, job_id: str, *, request_id: str | None = None) -> ImageJob:
        return await self._transport.execute(get_spec(job_id, request_id))

    async def list(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        status: ImageJobStatus | str | None = None,
        visibility: str | None = None,
        favorite: bool | None = None,
        search: str | None = None,
        request_id: str | None = None,
        origin: str | None = None,
    ) -> ImageJobPage:
        spec = list_spec(
            limit=limit,
            cursor=cursor,
            status=status,
            visibility=visibility,
            favorite=favorite,
            search=search,
            request_id=request_id,
            origin=origin,
        )
        return await self._transport.execute(spec)

    async def iter(
        self,
        *,
        page_size: int = 100,
        status: ImageJobStatus | str | None = None,
        visibility: str | None = None,
        favorite: bool | None = None,
        search: str | None = None,
        origin: str | None = None,
    ) -> AsyncIterator[ImageJobSummary]:
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            page = await self.list(
                limit=page_size,
                cursor=cursor,
                status=status,
                visibility=visibility,
                favorite=favorite,
                search=search,
                origin=origin,
            )
            for item in page.items:
                yield item
            cursor = _check_page(seen, page.next_cursor)
            if cursor is None:
                return

    async def cancel(self, job_id: str, *, request_id: str | None = None) -> ImageJob:
        return await self._transport.execute(cancel_spec(job_id, request_id))

    async def update(
        self,
        job_id: str,
        *,
        favorite: bool | None = None,
        deleted: bool | None = None,
        request_id: str | None = None,
    ) -> ImageJob:
        return await self._transport.execute(update_spec(job_id, favorite, deleted, request_id))

    async def partial(self, job_id: str, *, request_id: str | None = None) -> JobPartial | None:
        return await self._transport.execute(partial_spec(job_id, request_id))

    async def wait(
        self,
        job_id: str,
        *,
        timeout: float = DEFAULT_WAIT_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        max_poll_interval: float = DEFAULT_MAX_POLL_INTERVAL,
    ) -> ImageJob:
        policy = WaitPolicy(timeout, poll_interval, max_poll_interval)
        while True:
            job = await self.get(job_id)
            if job.status.terminal:
                return job
            await _base_client.async_sleep(policy.next_sleep(job))
