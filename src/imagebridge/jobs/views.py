"""Stored job rows → contract shapes (``ImageJob``, ``ImageJobSummary``, ``ImageJobPage``).

A stored request can hold megabytes of inline images, so building a full :class:`ImageJob`
is meant to run in a worker thread (:func:`job_view` is plain, blocking code).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.jobs import ImageJob, ImageJobPage, ImageJobSummary
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import BridgeErrorBody, ImageResponse
from imagebridge.storage.records import JobPage, JobRecord, JobSummary

__all__ = ["job_view", "page_view", "summary_view"]


def _summary_fields(row: JobSummary | JobRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": row.id,
        "status": row.status,
        "created": row.created_at,
        "updated": row.updated_at,
        "favorite": row.favorite,
    }
    if row.started_at is not None:
        data["started"] = row.started_at
    if row.completed_at is not None:
        data["completed"] = row.completed_at
    if row.progress_stage is not None:
        data["progress"] = {"stage": row.progress_stage, "partial_images": row.partial_images}
    if row.deleted_at is not None:
        data["deleted"] = row.deleted_at
    return data


def _unreadable(job_id: str, part: str) -> BridgeError:
    return BridgeError(
        ErrorCode.INTERNAL,
        "durable job record could not be read",
        details={"job_id": job_id, "part": part},
    )


def summary_view(row: JobSummary) -> ImageJobSummary:
    return ImageJobSummary.model_validate(_summary_fields(row))


def page_view(page: JobPage) -> ImageJobPage:
    return ImageJobPage(
        items=[summary_view(item) for item in page.items], next_cursor=page.next_cursor
    )


def job_view(record: JobRecord, request: ImageRequest | None = None) -> ImageJob:
    """The full job; ``request`` skips re-parsing when the caller already holds it."""
    data = _summary_fields(record)
    data["cancel_requested"] = record.cancel_requested
    try:
        parsed = request if request is not None else ImageRequest.model_validate(record.request())
    except (ValidationError, ValueError) as exc:
        raise _unreadable(record.id, "request") from exc
    result: ImageResponse | None = None
    if record.response_json is not None:
        try:
            result = ImageResponse.model_validate_json(record.response_json)
        except ValidationError as exc:
            raise _unreadable(record.id, "result") from exc
    error: BridgeErrorBody | None = None
    raw_error = None
    try:
        raw_error = record.error()
    except ValueError as exc:
        raise _unreadable(record.id, "error") from exc
    if raw_error is not None:
        # Tolerant on purpose: an error written by an older bridge still shows.
        error = BridgeErrorBody.from_error(BridgeError.from_dict(raw_error))
    data.update(request=parsed, result=result, error=error)
    # Nested models are taken as they are (pydantic does not re-validate instances).
    return ImageJob.model_validate(data)
