"""The shared queue's notification codec: what one instance sends, another decodes."""

from __future__ import annotations

from imagebridge.storage.records import JobEvent, JobEventKind
from imagebridge.storage.rules.queue import decode_job_event, encode_job_event

from ..conftest import job_id


def test_event_payloads_round_trip_and_foreign_payloads_are_ignored() -> None:
    payload = encode_job_event(JobEventKind.CANCEL_REQUESTED, job_id(5))
    assert decode_job_event(payload) == JobEvent(JobEventKind.CANCEL_REQUESTED, job_id(5))
    for foreign in (
        "",
        "hello",
        "[]",
        '{"kind": "queued"}',
        '{"kind": "queued", "job_id": "x"}',
        '{"kind": "nope", "job_id": "' + job_id(1) + '"}',
        '{"kind": "queued", "job_id": "' + job_id(1) + '", "extra": 1}',
        "x" * 5_000,
        None,
    ):
        assert decode_job_event(foreign) is None
