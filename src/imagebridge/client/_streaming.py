"""Typed event streams for ``POST /v1/images/stream``.

Iterating a :class:`Stream` (or ``async for`` over an :class:`AsyncStream`) yields, in
the bridge's order: :class:`StartedEvent`, any :class:`ProgressEvent` and
:class:`PartialImageEvent`, then exactly one terminal event, :class:`CompletedEvent` or
:class:`StreamError`, after which iteration stops and the connection is released.
:meth:`Stream.final_response` consumes the rest and returns the response or raises the
streamed error. Leaving early (``close()``, ``break`` inside ``with``) closes the
connection, which makes the bridge cancel the work.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from typing import Literal, Self

import httpx
from pydantic import ValidationError

from imagebridge.client._exceptions import (
    BridgeAPIError,
    error_from_envelope,
    protocol_error,
    sent_request_error,
)
from imagebridge.client._sse import ServerSentEvent, SSEDecoder
from imagebridge.contract.envelope import ErrorEnvelope
from imagebridge.contract.events import (
    CompletedEvent,
    PartialImageEvent,
    ProgressEvent,
    StartedEvent,
    provider_event_adapter,
)
from imagebridge.contract.response import ImageResponse

__all__ = ["AsyncStream", "Stream", "StreamError", "StreamEvent"]

_EVENT_NAMES = frozenset({"started", "progress", "partial_image", "completed"})


@dataclass(frozen=True, slots=True)
class StreamError:
    """The stream's terminal ``error`` event. ``error.status_code`` is the status the
    same failure would have had on ``POST /v1/images`` (the stream itself answered 200)."""

    error: BridgeAPIError
    type: Literal["error"] = "error"


StreamEvent = StartedEvent | ProgressEvent | PartialImageEvent | CompletedEvent | StreamError


def decode_event(sse: ServerSentEvent) -> StreamEvent | None:
    """One SSE frame as a typed event; ``None`` for event names this SDK does not know."""
    if sse.event == "error":
        try:
            envelope = ErrorEnvelope.model_validate_json(sse.data)
        except (ValidationError, ValueError):
            raise protocol_error("the bridge sent a malformed error event") from None
        error = error_from_envelope(envelope, status_code=None)
        error.status_code = error.http_status
        return StreamError(error)
    if sse.event not in _EVENT_NAMES:
        return None
    try:
        event = provider_event_adapter.validate_json(sse.data)
    except (ValidationError, ValueError):
        raise protocol_error(f"the bridge sent a malformed {sse.event} event") from None
    if event.type != sse.event:
        raise protocol_error("an event's name does not match its type", event=sse.event)
    return event


def _unfinished() -> BridgeAPIError:
    error = protocol_error("the event stream ended before a completed or error event")
    error.mark_unknown_outcome()
    return error


def _final(events: list[StreamEvent]) -> ImageResponse:
    for event in events:
        if isinstance(event, StreamError):
            raise event.error
        if isinstance(event, CompletedEvent):
            return event.response
    raise _unfinished()


class _StreamState:
    def __init__(self, response: httpx.Response, url: str, decoder: SSEDecoder) -> None:
        self.response = response
        self.url = url
        self.decoder = decoder
        self.terminal: StreamEvent | None = None
        header = response.headers.get("x-request-id")
        self.request_id: str | None = str(header) if header is not None else None

    def events(self, frames: list[ServerSentEvent]) -> list[StreamEvent]:
        decoded: list[StreamEvent] = []
        for frame in frames:
            if self.terminal is not None:
                break
            event = decode_event(frame)
            if event is None:
                continue
            if isinstance(event, StreamError) and event.error.request_id is None:
                event.error.request_id = self.request_id
            decoded.append(event)
            if isinstance(event, CompletedEvent | StreamError):
                self.terminal = event
        return decoded

    def transport_failure(self, exc: httpx.HTTPError) -> BridgeAPIError:
        error = sent_request_error(self.url, exc, safe=False)
        error.request_id = self.request_id
        return error


class Stream:
    """A synchronous event stream; use it in a ``with`` block."""

    def __init__(self, response: httpx.Response, *, url: str, decoder: SSEDecoder) -> None:
        self._state = _StreamState(response, url, decoder)
        self._iterator = self._iterate()

    @property
    def request_id(self) -> str | None:
        """The bridge's ``x-request-id`` for this stream (the final response's ``id``)."""
        return self._state.request_id

    def _iterate(self) -> Generator[StreamEvent, None, None]:
        state = self._state
        try:
            try:
                for chunk in state.response.iter_bytes():
                    yield from state.events(state.decoder.feed(chunk))
                    if state.terminal is not None:
                        return
                yield from state.events(state.decoder.finish())
            except httpx.HTTPError as exc:
                raise state.transport_failure(exc) from exc
            if state.terminal is None:
                raise _unfinished()
        finally:
            state.response.close()

    def __iter__(self) -> Iterator[StreamEvent]:
        return self

    def __next__(self) -> StreamEvent:
        return next(self._iterator)

    def final_response(self) -> ImageResponse:
        """Consume the stream: the completed response, or raise the streamed error."""
        remaining = list(self)
        terminal = self._state.terminal
        return _final([terminal] if terminal is not None else remaining)

    def close(self) -> None:
        """Stop reading and release the connection (the bridge cancels the work)."""
        self._iterator.close()
        self._state.response.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncStream:
    """An asynchronous event stream; use it in an ``async with`` block."""

    def __init__(self, response: httpx.Response, *, url: str, decoder: SSEDecoder) -> None:
        self._state = _StreamState(response, url, decoder)
        self._iterator = self._iterate()

    @property
    def request_id(self) -> str | None:
        return self._state.request_id

    async def _iterate(self) -> AsyncGenerator[StreamEvent, None]:
        state = self._state
        try:
            try:
                async for chunk in state.response.aiter_bytes():
                    for event in state.events(state.decoder.feed(chunk)):
                        yield event
                    if state.terminal is not None:
                        return
                for event in state.events(state.decoder.finish()):
                    yield event
            except httpx.HTTPError as exc:
                raise state.transport_failure(exc) from exc
            if state.terminal is None:
                raise _unfinished()
        finally:
            await state.response.aclose()

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self

    async def __anext__(self) -> StreamEvent:
        return await self._iterator.__anext__()

    async def final_response(self) -> ImageResponse:
        remaining = [event async for event in self]
        terminal = self._state.terminal
        return _final([terminal] if terminal is not None else remaining)

    async def aclose(self) -> None:
        await self._iterator.aclose()
        await self._state.response.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
