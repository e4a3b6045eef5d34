"""Folding the Responses SSE events of one call into its result."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.wire._constants import (
    MAX_BASE64_CHARS,
    MAX_REVISED_PROMPT_BYTES,
    OFFLOAD_EVENT_CHARS,
)
from imagebridge.providers.codex.wire._errors import stream_failure_error
from imagebridge.providers.codex.wire._payload import (
    _revised_prompt,
    _too_large_image,
)
from imagebridge.providers.codex.wire._usage import TokenUsage
from imagebridge.providers.sse import SseEvent

_ITEM_TYPES: Final = frozenset(
    {
        "image_generation_call",
        "message",
        "reasoning",
        "function_call",
        "web_search_call",
        "computer_call",
    }
)
_CONTENT_TYPES: Final = frozenset({"refusal", "output_text"})
_CALL_STATUSES: Final = frozenset({"in_progress", "generating", "completed", "failed"})
_FAILURE_EVENTS: Final = frozenset({"response.failed", "response.incomplete", "error"})


@dataclass(frozen=True, slots=True)
class CodexPartialImage:
    """A progress preview: output ``index``, its ``partial_index`` and the base64 data."""

    index: int
    partial_index: int
    b64: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ResponsesResult:
    """What one successful Responses stream produced."""

    image_b64: str = field(repr=False)
    revised_prompt: str | None = field(repr=False)
    usage: TokenUsage | None
    partial_images: tuple[CodexPartialImage, ...] = field(repr=False)
    output_item_types: frozenset[str]
    image_call_statuses: frozenset[str]
    message_content_types: frozenset[str]


class ResponsesStreamState:
    """Folds Responses SSE events into one result.

    Feed events with :meth:`handle` (it returns a :class:`CodexPartialImage` to forward as
    progress, or ``None``); at the end of the stream :meth:`finish` returns the result
    or raises the classified :class:`BridgeError`. ``clock`` gives epoch seconds, used to
    turn ``resets_at`` into ``retry_after_ms``; ``secrets`` (the credentials' values) are
    kept out of upstream codes.

    The backend of late 2026 differs from the original's picture in two ways handled
    here (docs/providers.md, "Codex backend, as measured"): the last
    ``response.output_item.done`` may carry the whole image with ``status: "generating"``
    and no ``response.completed`` follows, and one image may arrive in several events. A
    complete final image is therefore enough to finish, and each image counts once: by
    item id, and by content when ids differ. A partial identical to one already forwarded
    (or to the final) is not forwarded again, and with ``keep_partials=False`` no partial
    is retained, so what the state buffers stays about one image however often the backend
    repeats it.
    """

    def __init__(
        self,
        *,
        output_index: int = 0,
        max_base64_chars: int = MAX_BASE64_CHARS,
        max_revised_prompt_bytes: int = MAX_REVISED_PROMPT_BYTES,
        clock: Callable[[], float] = time.time,
        secrets: Sequence[str] = (),
        keep_partials: bool = True,
    ) -> None:
        self._output_index = output_index
        self._keep_partials = keep_partials
        self._partial_digests: set[bytes] = set()
        self._final_item_id: str | None = None
        self._final_digest: bytes | None = None
        self.duplicate_images = 0
        """Image payloads (final or partial) dropped because they were already seen."""
        self._secrets = tuple(secrets)
        self._max_base64_chars = max_base64_chars
        self._max_revised_prompt_bytes = max_revised_prompt_bytes
        self._clock = clock
        self._partials: list[CodexPartialImage] = []
        self._partial_counter = 0
        self._final_b64: str | None = None
        self._revised_prompt: str | None = None
        self._usage: TokenUsage | None = None
        self._completed = False
        self._failure: BridgeError | None = None
        self._item_types: set[str] = set()
        self._call_statuses: set[str] = set()
        self._content_types: set[str] = set()

    @property
    def completed(self) -> bool:
        return self._completed

    @property
    def failure(self) -> BridgeError | None:
        """The first in-stream failure, once one arrived (the stream can stop there)."""
        return self._failure

    @property
    def partial_images(self) -> tuple[CodexPartialImage, ...]:
        return tuple(self._partials)

    @property
    def retained_chars(self) -> int:
        """Base64 characters the state holds now (the final image and kept partials)."""
        final = len(self._final_b64) if self._final_b64 is not None else 0
        return final + sum(len(partial.b64) for partial in self._partials)

    def handle(self, event: SseEvent) -> CodexPartialImage | None:
        """Fold one SSE event; its JSON ``type`` decides (the ``event:`` name is ignored)."""
        try:
            payload = json.loads(event.data)
        except (ValueError, RecursionError):
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex stream sent an event that is not valid JSON.",
                details={"stage": "event"},
            ) from None
        if not isinstance(payload, Mapping):
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex stream sent an event that is not a JSON object.",
                details={"stage": "event"},
            )
        return self.handle_payload(payload)

    async def ahandle(
        self, event: SseEvent, *, offload_over: int = OFFLOAD_EVENT_CHARS
    ) -> CodexPartialImage | None:
        """:meth:`handle`, parsing events larger than ``offload_over`` in a worker thread.

        Final and partial images arrive as multi-megabyte JSON events; parsing one on the
        event loop would stall every other request for tens of milliseconds.
        """
        if len(event.data) > offload_over:
            return await asyncio.to_thread(self.handle, event)
        return self.handle(event)

    def handle_payload(self, payload: Mapping[str, Any]) -> CodexPartialImage | None:
        kind = payload.get("type")
        if kind == "response.image_generation_call.partial_image":
            return self._on_partial(payload)
        if kind == "response.output_item.done":
            self._scan_item(payload.get("item"))
        elif kind == "response.completed":
            self._on_completed(payload.get("response"))
        elif isinstance(kind, str) and kind in _FAILURE_EVENTS and self._failure is None:
            self._failure = stream_failure_error(payload, now=self._clock(), secrets=self._secrets)
        return None

    def finish(self) -> ResponsesResult:
        """The result, or the error the finish rules give for this stream."""
        if self._failure is not None:
            raise self._failure.copy()
        if not self._completed and self._final_b64 is None:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex stream ended before response.completed without a complete image.",
                details={"stage": "stream"},
            )
        if self._final_b64 is None:
            raise self._no_image_error()
        return ResponsesResult(
            image_b64=self._final_b64,
            revised_prompt=self._revised_prompt,
            usage=self._usage,
            partial_images=tuple(self._partials),
            output_item_types=frozenset(self._item_types),
            image_call_statuses=frozenset(self._call_statuses),
            message_content_types=frozenset(self._content_types),
        )

    # -- internals ---------------------------------------------------------------------

    def _on_partial(self, payload: Mapping[str, Any]) -> CodexPartialImage | None:
        b64 = payload.get("partial_image_b64")
        if not isinstance(b64, str) or not b64:
            b64 = payload.get("partial_image")
        if not isinstance(b64, str) or not b64:
            return None
        if len(b64) > self._max_base64_chars:
            raise _too_large_image(self._max_base64_chars)
        raw_index = payload.get("partial_image_index", payload.get("partialImageIndex"))
        if raw_index is None:
            index = self._partial_counter
        elif isinstance(raw_index, int) and not isinstance(raw_index, bool):
            index = raw_index
        else:
            index = -1
        if not 0 <= index <= 255:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex stream sent a partial image index out of range.",
                details={"stage": "event"},
            )
        self._partial_counter = index + 1
        digest = _digest(b64)
        if digest in self._partial_digests or digest == self._final_digest:
            self.duplicate_images += 1
            return None
        self._partial_digests.add(digest)
        partial = CodexPartialImage(index=self._output_index, partial_index=index, b64=b64)
        if self._keep_partials:
            self._partials.append(partial)
        return partial

    def _on_completed(self, response: object) -> None:
        self._completed = True
        if not isinstance(response, Mapping):
            return
        output = response.get("output")
        if isinstance(output, list):
            for item in output:
                self._scan_item(item)
        tool_usage = response.get("tool_usage")
        image_gen = tool_usage.get("image_gen") if isinstance(tool_usage, Mapping) else None
        usage = TokenUsage.parse(response.get("usage"), image_gen=image_gen)
        if usage is not None:
            self._usage = usage

    def _scan_item(self, item: object) -> None:
        if not isinstance(item, Mapping):
            self._item_types.add("missing")
            return
        kind = item.get("type")
        if not isinstance(kind, str):
            self._item_types.add("missing")
            return
        self._item_types.add(kind if kind in _ITEM_TYPES else "other")
        if kind == "message":
            self._scan_message(item.get("content"))
        elif kind == "image_generation_call":
            self._scan_image_call(item)

    def _scan_message(self, content: object) -> None:
        if not isinstance(content, list):
            return
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if not isinstance(kind, str):
                self._content_types.add("missing")
            else:
                self._content_types.add(kind if kind in _CONTENT_TYPES else "other")

    def _scan_image_call(self, item: Mapping[str, Any]) -> None:
        status = item.get("status")
        if not isinstance(status, str):
            self._call_statuses.add("missing")
        else:
            self._call_statuses.add(status if status in _CALL_STATUSES else "other")
        result = item.get("result")
        if not isinstance(result, str) or not result:
            return
        if len(result) > self._max_base64_chars:
            raise _too_large_image(self._max_base64_chars)
        raw_id = item.get("id")
        item_id = raw_id if isinstance(raw_id, str) and raw_id else None
        digest = _digest(result)
        if self._final_b64 is not None:
            same_item = item_id is not None and item_id == self._final_item_id
            if not same_item and digest != self._final_digest:
                raise BridgeError(
                    ErrorCode.PROTOCOL,
                    "The Codex stream sent multiple final images for one output.",
                    details={"stage": "event"},
                )
            self.duplicate_images += 1
        self._final_b64 = result  # the same image: a later copy of one item replaces it
        self._final_digest = digest
        self._final_item_id = item_id or self._final_item_id
        revised = _revised_prompt(item, self._max_revised_prompt_bytes)
        if revised:
            self._revised_prompt = revised

    def _no_image_error(self) -> BridgeError:
        diagnostics = {
            "output_item_types": sorted(self._item_types),
            "message_content_types": sorted(self._content_types),
            "image_call_statuses": sorted(self._call_statuses),
        }
        if "refusal" in self._content_types:
            return BridgeError.safety_rejected(
                "The Codex model refused to generate the image.",
                upstream_code="completed_with_refusal",
                **diagnostics,
            )
        if "failed" in self._call_statuses:
            return BridgeError(
                ErrorCode.UPSTREAM,
                "The Codex image generation call failed.",
                retryable=True,
                details={"upstream_code": "image_call_failed", **diagnostics},
            )
        return BridgeError(
            ErrorCode.UPSTREAM,
            "The Codex response completed without an image.",
            retryable=True,
            details={"upstream_code": "completed_without_image", **diagnostics},
        )


def _digest(b64: str) -> bytes:
    """A content key for one base64 payload (hashing is cheap next to parsing its event)."""
    return hashlib.sha256(b64.encode("utf-8", "surrogatepass")).digest()


def parse_responses_events(
    events: Iterable[SseEvent],
    *,
    output_index: int = 0,
    max_base64_chars: int = MAX_BASE64_CHARS,
    clock: Callable[[], float] = time.time,
    secrets: Sequence[str] = (),
) -> ResponsesResult:
    """Fold a whole event sequence (partial images are in the result)."""
    state = ResponsesStreamState(
        output_index=output_index, max_base64_chars=max_base64_chars, clock=clock, secrets=secrets
    )
    for event in events:
        state.handle(event)
    return state.finish()
