"""The incremental SSE decoder: framing rules, limits, errors, and chunking invariance."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.sse import (
    SseDecoder,
    SseEvent,
    SseLimits,
    aiter_sse_events,
    iter_sse_events,
)
from tests.support.codex_backend import FIXTURE_SSE_PATH


def decode(
    chunks: Iterable[bytes], limits: SseLimits | None = None
) -> tuple[list[SseEvent], str | None]:
    """Events delivered before any error, and the error message (``None`` if none)."""
    decoder = SseDecoder(limits)
    events: list[SseEvent] = []
    try:
        for chunk in chunks:
            for event in decoder.feed(chunk):
                events.append(event)
        for event in decoder.close():
            events.append(event)
    except BridgeError as error:
        assert error.code is ErrorCode.PROTOCOL
        return events, error.message
    return events, None


def events_of(raw: bytes, limits: SseLimits | None = None) -> list[SseEvent]:
    events, error = decode([raw], limits)
    assert error is None
    return events


def split(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    points = sorted({min(max(cut, 0), len(data)) for cut in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return pieces


# -- framing -----------------------------------------------------------------------------


def test_recorded_fixture_decodes_to_its_four_events() -> None:
    raw = FIXTURE_SSE_PATH.read_bytes()
    decoder = SseDecoder()
    events = [*decoder.feed(raw), *decoder.close()]
    assert [event.event for event in events] == [None, "response.output_item.done", None, None]
    assert [event.data.split('"type":"')[1].split('"')[0] for event in events] == [
        "response.image_generation_call.partial_image",
        "response.output_item.done",
        "future.unknown_event",
        "response.completed",
    ]
    assert decoder.done is True
    assert decoder.events_seen == 4


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_lf_crlf_and_cr_line_endings_are_equivalent(newline: bytes) -> None:
    raw = newline.join([b"event: a", b"data: one", b"data: two", b"", b"data: three", b"", b""])
    assert events_of(raw) == [SseEvent("a", "one\ntwo"), SseEvent(None, "three")]


def test_comments_heartbeats_id_retry_and_unknown_fields_are_ignored() -> None:
    raw = b": heartbeat\n:\nid: 7\nretry: 1000\nfoo: bar\ndata: x\n: inside\n\n"
    assert events_of(raw) == [SseEvent(None, "x")]


def test_only_one_space_after_the_colon_is_stripped() -> None:
    assert events_of(b"data:  two spaces\n\ndata:none\n\n") == [
        SseEvent(None, " two spaces"),
        SseEvent(None, "none"),
    ]


def test_field_without_colon_counts_as_empty_value() -> None:
    assert events_of(b"data\ndata: x\n\n") == [SseEvent(None, "\nx")]


def test_event_name_applies_to_one_event_only() -> None:
    raw = b"event: first\ndata: 1\n\ndata: 2\n\nevent: lonely\n\ndata: 3\n\n"
    assert events_of(raw) == [SseEvent("first", "1"), SseEvent(None, "2"), SseEvent(None, "3")]


def test_done_sentinel_and_empty_data_are_swallowed() -> None:
    decoder = SseDecoder()
    events = [*decoder.feed(b"data: [DONE]\n\ndata:\n\ndata: after\n\n"), *decoder.close()]
    assert events == [SseEvent(None, "after")]
    assert decoder.done is True


def test_unterminated_last_line_is_flushed_at_close() -> None:
    decoder = SseDecoder()
    assert list(decoder.feed(b"data: a\n\ndata: tail")) == [SseEvent(None, "a")]
    assert list(decoder.close()) == [SseEvent(None, "tail")]


def test_pending_event_without_blank_line_is_dispatched_at_close() -> None:
    assert events_of(b"data: a\ndata: b\n") == [SseEvent(None, "a\nb")]


def test_byte_order_mark_is_stripped_at_stream_start_only() -> None:
    assert events_of(b"\xef\xbb\xbfdata: a\n\n") == [SseEvent(None, "a")]
    assert events_of(b"data: \xef\xbb\xbfa\n\n") == [SseEvent(None, "\ufeffa")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert decode([b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]) == (
        [SseEvent(None, "a"), SseEvent(None, "b")],
        None,
    )


def test_multibyte_character_split_across_chunks_decodes() -> None:
    raw = "data: héllo ✓\n\n".encode()
    assert decode([raw[:8], raw[8:15], raw[15:]]) == ([SseEvent(None, "héllo ✓")], None)


def test_feed_buffers_even_if_its_iterator_is_not_consumed() -> None:
    decoder = SseDecoder()
    decoder.feed(b"data: one\n\n")  # iterator dropped
    assert list(decoder.feed(b"data: two\n\n")) == [SseEvent(None, "one"), SseEvent(None, "two")]


# -- errors -------------------------------------------------------------------------------


def test_invalid_utf8_is_a_protocol_error() -> None:
    events, error = decode([b"data: ok\n\ndata: \xff\xfe\n\n"])
    assert events == [SseEvent(None, "ok")]
    assert error == "SSE stream is not valid UTF-8"


def test_invalid_utf8_in_a_comment_is_also_refused() -> None:
    assert decode([b": \xc3\n"])[1] == "SSE stream is not valid UTF-8"


def test_never_ending_line_fails_once_it_passes_the_limit() -> None:
    decoder = SseDecoder(SseLimits(max_line_bytes=100))
    assert list(decoder.feed(b"data: " + b"x" * 94)) == []  # exactly 100 pending bytes
    with pytest.raises(BridgeError) as caught:
        list(decoder.feed(b"x"))  # no newline yet: the pending line is what is limited
    assert caught.value.code is ErrorCode.PROTOCOL
    assert caught.value.message == "SSE line exceeds 100 bytes"


def test_a_chunk_larger_than_the_line_limit_of_short_lines_is_fine() -> None:
    """The original limited buffer + whole chunk; we limit lines."""
    raw = b"".join(b"data: %d\n\n" % i for i in range(100))
    assert len(raw) > 500
    events = events_of(raw, SseLimits(max_line_bytes=16))
    assert [event.data for event in events] == [str(i) for i in range(100)]


def test_line_exactly_at_the_limit_is_accepted() -> None:
    assert events_of(b"data: 1234\n\n", SseLimits(max_line_bytes=10)) == [SseEvent(None, "1234")]
    assert decode([b"data: 12345\n\n"], SseLimits(max_line_bytes=10))[1] is not None


def test_event_data_limit_counts_joined_lines() -> None:
    limits = SseLimits(max_event_bytes=7)
    assert events_of(b"data: abc\ndata: def\n\n", limits) == [SseEvent(None, "abc\ndef")]
    assert decode([b"data: abc\ndata: defg\n\n"], limits)[1] == "SSE event exceeds 7 bytes"


def test_stream_byte_limit_keeps_events_before_it() -> None:
    events, error = decode([b"data: a\n\n", b"data: b\n\n"], SseLimits(max_stream_bytes=12))
    assert events == [SseEvent(None, "a")]
    assert error == "SSE stream exceeds 12 bytes"


def test_event_count_limit() -> None:
    raw = b"data: 1\n\ndata: 2\n\ndata: 3\n\n"
    events, error = decode([raw], SseLimits(max_events=2))
    assert [event.data for event in events] == ["1", "2"]
    assert error == "SSE stream exceeds 2 events"


def test_decoder_stays_failed_after_an_error() -> None:
    decoder = SseDecoder()
    with pytest.raises(BridgeError):
        list(decoder.feed(b"data: \xff\n\n"))
    with pytest.raises(BridgeError) as again:
        list(decoder.feed(b"data: fine\n\n"))
    assert again.value.code is ErrorCode.PROTOCOL
    with pytest.raises(BridgeError):
        list(decoder.close())


def test_feeding_after_close_is_an_internal_error() -> None:
    decoder = SseDecoder()
    list(decoder.close())
    with pytest.raises(BridgeError) as caught:
        decoder.feed(b"data: late\n\n")
    assert caught.value.code is ErrorCode.INTERNAL


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_limits_must_be_positive_integers(bad: object) -> None:
    with pytest.raises(BridgeError) as caught:
        SseLimits(max_events=bad)  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.CONFIGURATION


def test_default_limits_follow_the_original() -> None:
    limits = SseLimits()
    assert (limits.max_line_bytes, limits.max_event_bytes) == (128 * 2**20, 128 * 2**20)
    assert (limits.max_stream_bytes, limits.max_events) == (256 * 2**20, 10_000)


# -- helpers -----------------------------------------------------------------------------


def test_iter_sse_events_decodes_a_sync_stream() -> None:
    assert list(iter_sse_events([b"data: a\n", b"\ndata: b"])) == [
        SseEvent(None, "a"),
        SseEvent(None, "b"),
    ]


async def test_aiter_sse_events_decodes_an_async_stream() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for piece in (b"event: x\nda", b"ta: 1\n\n", b"data: 2"):
            yield piece

    assert [event async for event in aiter_sse_events(chunks())] == [
        SseEvent("x", "1"),
        SseEvent(None, "2"),
    ]


# -- properties ----------------------------------------------------------------------------

SMALL_LIMITS = SseLimits(max_line_bytes=24, max_event_bytes=40, max_stream_bytes=300, max_events=6)
_alphabet = st.sampled_from(
    [
        *(b"data", b"event", b"id", b":", b" ", b"\n", b"\r", b"\r\n", b"x", b"[DONE]"),
        *(b"\xc3\xa9", b"\xff", b"\xc3", b"\xef\xbb\xbf", b"retry: 5", b"data: ", b"\n\n"),
    ]
)
_sse_like = st.lists(_alphabet, max_size=60).map(b"".join)
_cuts = st.lists(st.integers(min_value=0, max_value=400), max_size=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(_sse_like, st.binary(max_size=300)), cuts=_cuts)
@pytest.mark.parametrize("limits", [None, SMALL_LIMITS])
def test_any_bytes_any_chunking_give_the_same_outcome(
    limits: SseLimits | None, data: bytes, cuts: list[int]
) -> None:
    whole = decode([data], limits)
    chunked = decode(split(data, cuts), limits)
    bytewise = decode([data[i : i + 1] for i in range(len(data))], limits)
    assert chunked == whole
    assert bytewise == whole


_names = st.one_of(st.none(), st.text(alphabet="abcdefgh.", min_size=1, max_size=10))
_values = st.lists(
    st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=12),
    min_size=1,
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(st.tuples(_names, _values), max_size=8),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=_cuts,
)
def test_well_formed_streams_round_trip(
    events: list[tuple[str | None, list[str]]], newline: str, cuts: list[int]
) -> None:
    lines: list[str] = [": opening comment"]
    for name, values in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.extend(f"data: {value}" for value in values)
        lines.append("")
    raw = (newline.join(lines) + newline).encode()
    expected = [
        SseEvent(name, "\n".join(values))
        for name, values in events
        if "\n".join(values) not in ("", "[DONE]")
    ]
    assert decode(split(raw, cuts)) == (expected, None)
