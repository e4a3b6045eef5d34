"""A bounded server-sent-events decoder (the subset of the WHATWG rules the bridge uses).

Bytes go in as they arrive, complete events come out. Every line ending (``\\n``,
``\\r\\n``, ``\\r``) is accepted, comments (``: heartbeat``) are skipped, ``data`` lines
are joined with ``\\n``, ``id``/``retry`` are ignored. One event may not exceed
``max_event_bytes`` and the whole stream may not exceed ``max_total_bytes``: a peer that
never ends a line cannot make the client buffer without limit. Scanning resumes where
the previous search stopped, so a large event arriving in many chunks costs linear time.
"""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.client._exceptions import BridgeAPIError, protocol_error, too_large_error

__all__ = ["SSEDecoder", "ServerSentEvent"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    event: str
    data: str


class SSEDecoder:
    def __init__(self, *, max_event_bytes: int, max_total_bytes: int) -> None:
        self._max_event = max_event_bytes
        self._max_total = max_total_bytes
        self._buffer = bytearray()
        self._searched = 0
        self._total = 0
        self._event = ""
        self._data: list[str] = []
        self._data_bytes = 0

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Events completed by ``chunk``."""
        self._total += len(chunk)
        if self._total > self._max_total:
            raise too_large_error(self._max_total)
        self._buffer += chunk
        events = self._drain(final=False)
        if len(self._buffer) + self._data_bytes > self._max_event:
            raise too_large_error(self._max_event)
        return events

    def finish(self) -> list[ServerSentEvent]:
        """The end of the stream: a last unterminated line still counts; a half event not."""
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        while True:
            line = self._next_line(final=final)
            if line is None:
                return events
            event = self._line(line)
            if event is not None:
                events.append(event)

    def _next_line(self, *, final: bool) -> bytes | None:
        buffer = self._buffer
        start = self._searched
        newline = buffer.find(b"\n", start)
        carriage = buffer.find(b"\r", start, newline if newline != -1 else len(buffer))
        if carriage != -1:
            if carriage == len(buffer) - 1 and not final:
                self._searched = carriage  # a "\n" may follow in the next chunk
                return None
            line = bytes(buffer[:carriage])
            skip = 2 if buffer[carriage + 1 : carriage + 2] == b"\n" else 1
            del buffer[: carriage + skip]
        elif newline != -1:
            line = bytes(buffer[:newline])
            del buffer[: newline + 1]
        elif final and buffer:
            line = bytes(buffer)
            buffer.clear()
        else:
            self._searched = len(buffer)
            return None
        self._searched = 0
        return line

    def _line(self, raw: bytes) -> ServerSentEvent | None:
        if not raw:
            return self._dispatch()
        if raw.startswith(b":"):
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self._malformed() from None
        name, _, value = text.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
            self._data_bytes += len(raw) + 1
            if self._data_bytes > self._max_event:
                raise too_large_error(self._max_event)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = ServerSentEvent(self._event or "message", "\n".join(self._data))
        self._event = ""
        self._data = []
        self._data_bytes = 0
        return event

    @staticmethod
    def _malformed() -> BridgeAPIError:
        return protocol_error("the bridge sent an event stream line that is not UTF-8")
