"""The bounded SSE decoder: framing rules, chunk boundaries and size limits."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imagebridge.client import BridgeAPIError, ErrorCode
from imagebridge.client._sse import ServerSentEvent, SSEDecoder

STREAM = (
    b'event: started\ndata: {"type":"started"}\n\n'
    b": heartbeat\n\n"
    b"event: progress\r\ndata: a\r\ndata: b\r\n\r\n"
    b"event: completed\rdata:no-space\r\r"
)
EXPECTED = [
    ServerSentEvent("started", '{"type":"started"}'),
    ServerSentEvent("progress", "a\nb"),
    ServerSentEvent("completed", "no-space"),
]


def decoder(max_event: int = 1 << 24, max_total: int = 1 << 26) -> SSEDecoder:
    return SSEDecoder(max_event_bytes=max_event, max_total_bytes=max_total)


def decode_in(chunks: list[bytes]) -> list[ServerSentEvent]:
    sse = decoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(sse.feed(chunk))
    return events + sse.finish()


def test_all_line_endings_comments_and_multiline_data() -> None:
    assert decode_in([STREAM]) == EXPECTED


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted({0, len(STREAM), *cuts})
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    assert decode_in(chunks) == EXPECTED


def test_a_crlf_split_across_chunks_is_one_line_ending() -> None:
    events = decode_in([b"data: x\r", b"\n\r", b"\n"])
    assert events == [ServerSentEvent("message", "x")]


def test_an_unterminated_event_at_the_end_is_dropped() -> None:
    assert decode_in([b"event: completed\ndata: partial"]) == []


def test_an_endless_line_is_refused() -> None:
    sse = decoder(max_event=100)
    for _ in range(2):
        sse.feed(b"data: " + b"x" * 30)  # 72 bytes of one unfinished line so far
    with pytest.raises(BridgeAPIError) as caught:
        sse.feed(b"x" * 30)
    assert caught.value.code is ErrorCode.PROTOCOL
    assert caught.value.details["maximum_bytes"] == 100


def test_many_data_lines_count_towards_one_event() -> None:
    sse = decoder(max_event=100)
    with pytest.raises(BridgeAPIError):
        sse.feed(b"data: 0123456789\n" * 20)


def test_the_whole_stream_is_bounded() -> None:
    sse = decoder(max_total=1000)
    for _ in range(76):
        sse.feed(b": heartbeat\n\n")  # 13 bytes each: 988 in total
    with pytest.raises(BridgeAPIError) as caught:
        sse.feed(b": heartbeat\n\n")
    assert caught.value.details["maximum_bytes"] == 1000


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(BridgeAPIError) as caught:
        decoder().feed(b"data: \xff\xfe\n\n")
    assert caught.value.code is ErrorCode.PROTOCOL


def test_large_events_in_small_chunks_decode_in_linear_time() -> None:
    payload = b"x" * 2_000_000
    body = b"event: completed\ndata: " + payload + b"\n\n"
    chunks = [body[i : i + 1024] for i in range(0, len(body), 1024)]
    events = decode_in(chunks)
    assert len(events) == 1 and len(events[0].data) == len(payload)
