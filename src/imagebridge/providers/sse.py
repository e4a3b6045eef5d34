"""An incremental, bounded Server-Sent Events decoder for upstream byte streams.

Network chunks may split a line, a CRLF pair or a UTF-8 sequence anywhere: the decoder
only ever decodes whole lines, so how the bytes were chunked never changes the events
(a property test holds it to that). Lines end with LF, CRLF or a bare CR. Comments
(``:``, heartbeats), ``id:``, ``retry:`` and unknown fields are ignored; ``event:`` is
kept; several ``data:`` lines are joined with ``\\n``; a blank line dispatches; the
``[DONE]`` sentinel and empty data are swallowed (:attr:`SseDecoder.done` records the
sentinel). An unterminated last line is flushed by :meth:`SseDecoder.close`.

Limits (:class:`SseLimits`, defaults from the original) bound memory whatever the peer
sends. Unlike the original, the line limit applies to one line — including
the pending, not yet terminated line held between chunks — never to a network chunk, so a
large chunk of short lines is fine while a never-ending line fails as soon as it passes the
limit. At any moment the decoder holds at most ``max_line_bytes`` of unterminated input
plus ``max_event_bytes`` of undispatched event data. Every failure, including invalid
UTF-8, is a ``protocol`` :class:`BridgeError`, and the decoder stays failed afterwards.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "DONE_SENTINEL",
    "SseDecoder",
    "SseEvent",
    "SseLimits",
    "aiter_sse_events",
    "iter_sse_events",
]

MiB: Final = 1024 * 1024
DONE_SENTINEL: Final = "[DONE]"
_BOM: Final = b"\xef\xbb\xbf"
_CR: Final = 0x0D
_LF: Final = 0x0A
_COLON: Final = 0x3A


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its ``event:`` name (``None`` when absent) and joined data."""

    event: str | None
    data: str


@dataclass(frozen=True, slots=True)
class SseLimits:
    """Bounds on what one stream may make the decoder hold or produce."""

    max_line_bytes: int = 128 * MiB
    """Longest line, terminator excluded; also caps the pending unterminated line."""
    max_event_bytes: int = 128 * MiB
    """Most ``data`` bytes buffered for one event before it is dispatched."""
    max_stream_bytes: int = 256 * MiB
    """Most bytes accepted over the whole stream."""
    max_events: int = 10_000
    """Most events dispatched over the whole stream."""

    def __post_init__(self) -> None:
        for name in ("max_line_bytes", "max_event_bytes", "max_stream_bytes", "max_events"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    f"SSE limit {name} must be a positive integer",
                    details={"field": name},
                )


class SseDecoder:
    """Feed bytes with :meth:`feed`, finish with :meth:`close`; both return event iterators.

    ``feed`` buffers the chunk at once and returns a lazy iterator over the events it
    completes; iterate it fully (an abandoned iterator leaves its lines buffered for the
    next call, nothing is lost).
    """

    def __init__(self, limits: SseLimits | None = None) -> None:
        self._limits = limits if limits is not None else SseLimits()
        self._buffer = bytearray()
        self._pos = 0  # start of the unconsumed bytes in _buffer
        self._scan = 0  # no line end exists in _buffer[_pos:_scan]
        self._skip_lf = False  # the previous line ended with CR: drop one following LF
        self._first_line = True
        self._data_lines: list[str] = []
        self._data_bytes = 0
        self._event_name: str | None = None
        self._stream_bytes = 0
        self._events = 0
        self._overflowed = False
        self._closed = False
        self._failure: BridgeError | None = None
        self.done = False
        """``True`` once a ``data: [DONE]`` sentinel was seen."""

    @property
    def limits(self) -> SseLimits:
        return self._limits

    @property
    def bytes_seen(self) -> int:
        return self._stream_bytes

    @property
    def events_seen(self) -> int:
        return self._events

    def feed(self, chunk: bytes) -> Iterator[SseEvent]:
        """Buffer ``chunk`` and return an iterator over the events it completes."""
        self._check_usable()
        room = self._limits.max_stream_bytes - self._stream_bytes
        if len(chunk) > room:
            chunk = chunk[:room]
            self._overflowed = True
        self._stream_bytes += len(chunk)
        self._buffer += chunk
        return self._drain()

    def close(self) -> Iterator[SseEvent]:
        """End of stream: flush an unterminated last line and a pending event."""
        self._check_usable()
        self._closed = True
        return self._flush()

    # -- internals ------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise self._failure.copy()
        if self._closed:
            raise BridgeError(ErrorCode.INTERNAL, "SSE decoder used after close")

    def _drain(self) -> Iterator[SseEvent]:
        while True:
            line = self._take_line()
            if line is None:
                break
            event = self._process_line(line)
            if event is not None:
                yield event
        if self._overflowed:
            raise self._fail(f"SSE stream exceeds {self._limits.max_stream_bytes} bytes")

    def _flush(self) -> Iterator[SseEvent]:
        yield from self._drain()
        rest = bytes(self._buffer[self._pos :])
        self._buffer.clear()
        self._pos = self._scan = 0
        if rest:
            event = self._process_line(rest)
            if event is not None:
                yield event
        event = self._dispatch()
        if event is not None:
            yield event

    def _take_line(self) -> bytes | None:
        buffer = self._buffer
        if self._skip_lf and self._pos < len(buffer):
            if buffer[self._pos] == _LF:
                self._pos += 1
            self._skip_lf = False
            self._scan = max(self._scan, self._pos)
        start = max(self._scan, self._pos)
        # memchr-speed searches; the CR search never looks past the next LF, so many
        # short lines in a large buffer stay linear.
        newline = buffer.find(b"\n", start)
        carriage = buffer.find(b"\r", start, len(buffer) if newline < 0 else newline)
        end = carriage if carriage >= 0 else newline
        if end < 0:
            self._scan = len(buffer)
            if len(buffer) - self._pos > self._limits.max_line_bytes:
                raise self._fail(self._line_message())
            if self._pos:
                del buffer[: self._pos]
                self._scan -= self._pos
                self._pos = 0
            return None
        if end - self._pos > self._limits.max_line_bytes:
            raise self._fail(self._line_message())
        with memoryview(buffer) as view:
            line = view[self._pos : end].tobytes()  # one copy, however long the line
        if buffer[end] == _CR:
            if end + 1 < len(buffer):
                self._pos = end + 2 if buffer[end + 1] == _LF else end + 1
            else:
                self._pos = end + 1
                self._skip_lf = True
        else:
            self._pos = end + 1
        self._scan = self._pos
        return line

    def _line_message(self) -> str:
        return f"SSE line exceeds {self._limits.max_line_bytes} bytes"

    def _process_line(self, line: bytes) -> SseEvent | None:
        start = 0
        if self._first_line:
            self._first_line = False
            if line.startswith(_BOM):
                start = len(_BOM)
        if len(line) == start:
            return self._dispatch()
        if line[start] == _COLON:
            self._decode(memoryview(line)[start:])  # comments must be UTF-8 too
            return None
        colon = line.find(b":", start)
        if colon < 0:
            name, value_start = line[start:], len(line)
        else:
            name, value_start = line[start:colon], colon + 1
            if line[value_start : value_start + 1] == b" ":
                value_start += 1
        value = memoryview(line)[value_start:]  # no copy of a multi-megabyte payload
        if name == b"data":
            added = len(value) + (1 if self._data_lines else 0)
            if self._data_bytes + added > self._limits.max_event_bytes:
                raise self._fail(f"SSE event exceeds {self._limits.max_event_bytes} bytes")
            self._data_lines.append(self._decode(value))
            self._data_bytes += added
        elif name == b"event":
            self._event_name = self._decode(value)
        else:
            self._decode(memoryview(line)[start:])  # id, retry, unknown: ignored but validated
        return None

    def _dispatch(self) -> SseEvent | None:
        name = self._event_name
        self._event_name = None
        if not self._data_lines:
            return None
        data = "\n".join(self._data_lines)
        self._data_lines = []
        self._data_bytes = 0
        if data == DONE_SENTINEL:
            self.done = True
            return None
        if not data:
            return None
        if self._events >= self._limits.max_events:
            raise self._fail(f"SSE stream exceeds {self._limits.max_events} events")
        self._events += 1
        return SseEvent(event=name, data=data)

    def _decode(self, raw: bytes | memoryview) -> str:
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError:
            raise self._fail("SSE stream is not valid UTF-8") from None

    def _fail(self, message: str) -> BridgeError:
        error = BridgeError(ErrorCode.PROTOCOL, message, details={"stage": "sse"})
        self._failure = error
        return error


def iter_sse_events(chunks: Iterable[bytes], limits: SseLimits | None = None) -> Iterator[SseEvent]:
    """Decode a whole synchronous byte stream."""
    decoder = SseDecoder(limits)
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.close()


async def aiter_sse_events(
    chunks: AsyncIterable[bytes], limits: SseLimits | None = None
) -> AsyncIterator[SseEvent]:
    """Decode an async byte stream (e.g. ``response.aiter_bytes()``) as it arrives."""
    decoder = SseDecoder(limits)
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.close():
        yield event
