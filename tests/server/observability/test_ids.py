"""Request ids and trace context."""

from __future__ import annotations

import uuid

import pytest

from imagebridge.server.ids import request_id_from, trace_context_from


@pytest.mark.parametrize("value", ["a", "caller-request-7", "A.b:c_d-e", "x" * 128])
def test_safe_request_ids_are_kept(value: str) -> None:
    assert request_id_from(value) == value


@pytest.mark.parametrize("value", [None, "", " ", "x" * 129, "a/b", "ünïcode", "a\nb"])
def test_other_request_ids_are_replaced_by_uuid7(value: str | None) -> None:
    minted = request_id_from(value)
    assert minted != value
    assert uuid.UUID(minted).version == 7


def test_valid_traceparent_keeps_trace_and_flags() -> None:
    inbound = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-00"
    trace = trace_context_from(inbound)
    assert trace.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace.flags == "00"
    assert trace.span_id != "00f067aa0ba902b7" and len(trace.span_id) == 16
    assert trace.header() == f"00-{trace.trace_id}-{trace.span_id}-00"


@pytest.mark.parametrize(
    "inbound",
    [
        None,
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01",
    ],
)
def test_invalid_traceparent_starts_a_new_trace(inbound: str | None) -> None:
    trace = trace_context_from(inbound)
    assert trace.flags == "01"
    assert len(trace.trace_id) == 32 and trace.trace_id != "0" * 32
    assert inbound is None or trace.trace_id not in inbound.lower()
