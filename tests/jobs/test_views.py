"""Stored rows → contract shapes: omission rules and unreadable rows."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.enums import ImageJobStatus
from imagebridge.jobs.views import job_view, summary_view
from imagebridge.storage import JobRecord

REQUEST = {"version": "1", "prompt": "fox", "operation": "generate"}


def record(**changes: object) -> JobRecord:
    base = JobRecord(
        id="01900000-0000-7000-8000-000000000001",
        auth_scope="anonymous-local",
        status=ImageJobStatus.QUEUED,
        created_at=10,
        updated_at=11,
        started_at=None,
        completed_at=None,
        request_json=json.dumps(REQUEST),
        prompt_search="fox",
        progress_stage=None,
        partial_images=0,
        response_json=None,
        error_json=None,
        cancel_requested=False,
        favorite=False,
        deleted_at=None,
        submission_key_hash=None,
        request_fingerprint=None,
        logical_bytes=0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_queued_job_omits_absent_fields() -> None:
    wire = job_view(record()).to_wire()
    assert wire == {
        "id": "01900000-0000-7000-8000-000000000001",
        "status": "queued",
        "created": 10,
        "updated": 11,
        "favorite": False,
        "request": job_view(record()).request.to_wire(),
        "cancel_requested": False,
    }


def test_a_finished_job_shows_progress_deletion_and_error() -> None:
    error = {"code": "upstream", "message": "boom", "retryable": True, "details": {"x": 1}}
    row = record(
        status=ImageJobStatus.FAILED,
        started_at=12,
        completed_at=13,
        progress_stage="completed",
        partial_images=2,
        error_json=json.dumps(error),
        deleted_at=14,
        favorite=True,
    )
    wire = job_view(row).to_wire()
    assert wire["progress"] == {"stage": "completed", "partial_images": 2}
    assert (wire["started"], wire["completed"], wire["deleted"]) == (12, 13, 14)
    assert wire["error"]["code"] == "upstream" and wire["error"]["details"] == {"x": 1}
    summary = summary_view(row.summary()).to_wire()
    assert "request" not in summary and summary["favorite"] is True


def test_errors_with_unknown_codes_still_show() -> None:
    row = record(status=ImageJobStatus.FAILED, error_json='{"code":"gone","message":"old"}')
    shown = job_view(row).error
    assert shown is not None and shown.code is ErrorCode.INTERNAL and shown.message == "old"


@pytest.mark.parametrize(
    ("changes", "part"),
    [
        ({"request_json": '{"prompt": 5}'}, "request"),
        ({"request_json": "not json"}, "request"),
        ({"response_json": '{"id": 1}'}, "result"),
        ({"error_json": "[1]"}, "error"),
    ],
)
def test_unreadable_rows_are_internal_errors(changes: dict[str, str], part: str) -> None:
    with pytest.raises(BridgeError) as caught:
        job_view(record(**changes))
    assert caught.value.code is ErrorCode.INTERNAL
    assert caught.value.details["part"] == part
