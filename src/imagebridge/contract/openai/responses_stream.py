"""OpenAI's Responses stream for image work: the SDK's event types, in its order.

One response streams as OpenAI streams an image tool call::

    response.created, response.in_progress,
    response.output_item.added (the image_generation_call, in_progress),
    response.image_generation_call.in_progress, ….generating,
    ….partial_image × partial_images,
    ….completed, response.output_item.done (the call with its image),
    response.output_item.added (the assistant message), response.content_part.added,
    response.output_text.delta, response.output_text.done, response.content_part.done,
    response.output_item.done (the message),
    response.completed

or, on a failure once it has begun, ``response.failed`` (the response with ``error``).
Every event carries ``sequence_number``, 0 upwards. :class:`ResponseEvents` numbers them
and remembers what was sent, so the opening events go out once whichever moment comes
first (a progress report, a partial image, the end).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from imagebridge.contract._base import U8, U64, ContractModel, StrictStr, omit_none
from imagebridge.contract.openai.responses_output import (
    ImageGenerationCallItem,
    OutputItem,
    OutputMessage,
    OutputText,
    ResponseIds,
    ResponseObject,
    ResponseShape,
    pending_call,
    pending_response,
)

__all__ = [
    "ContentPartEvent",
    "ImageCallEvent",
    "LifecycleEvent",
    "OutputItemEvent",
    "PartialImageEvent",
    "ResponseEvent",
    "ResponseEvents",
    "TextDeltaEvent",
    "TextDoneEvent",
]


class LifecycleEvent(ContractModel):
    """``response.created|in_progress|completed|failed``: the whole response so far."""

    type: Literal[
        "response.created",
        "response.in_progress",
        "response.completed",
        "response.failed",
        "response.incomplete",
        "response.queued",
    ]
    sequence_number: U64
    response: ResponseObject


class OutputItemEvent(ContractModel):
    type: Literal["response.output_item.added", "response.output_item.done"]
    sequence_number: U64
    output_index: U8
    item: OutputItem


class ImageCallEvent(ContractModel):
    type: Literal[
        "response.image_generation_call.in_progress",
        "response.image_generation_call.generating",
        "response.image_generation_call.completed",
    ]
    sequence_number: U64
    output_index: U8
    item_id: StrictStr


class PartialImageEvent(ContractModel):
    """One preview; its settings are the request's (the image is not finished)."""

    type: Literal["response.image_generation_call.partial_image"] = (
        "response.image_generation_call.partial_image"
    )
    sequence_number: U64
    output_index: U8
    item_id: StrictStr
    partial_image_b64: StrictStr
    partial_image_index: U8
    size: StrictStr | None = Field(default=None, exclude_if=omit_none)
    quality: StrictStr | None = Field(default=None, exclude_if=omit_none)
    background: StrictStr | None = Field(default=None, exclude_if=omit_none)
    output_format: StrictStr | None = Field(default=None, exclude_if=omit_none)


class ContentPartEvent(ContractModel):
    type: Literal["response.content_part.added", "response.content_part.done"]
    sequence_number: U64
    output_index: U8
    item_id: StrictStr
    content_index: U8 = 0
    part: OutputText


class TextDeltaEvent(ContractModel):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    sequence_number: U64
    output_index: U8
    item_id: StrictStr
    content_index: U8 = 0
    delta: StrictStr
    logprobs: list[object] = Field(default_factory=list)


class TextDoneEvent(ContractModel):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    sequence_number: U64
    output_index: U8
    item_id: StrictStr
    content_index: U8 = 0
    text: StrictStr
    logprobs: list[object] = Field(default_factory=list)


ResponseEvent = (
    LifecycleEvent
    | OutputItemEvent
    | ImageCallEvent
    | PartialImageEvent
    | ContentPartEvent
    | TextDeltaEvent
    | TextDoneEvent
)

_CALL = 0
"""The image_generation_call's ``output_index``; the assistant message is the next."""
_MESSAGE = 1


class ResponseEvents:
    """The events of one streamed response, numbered in the order they are made."""

    def __init__(
        self,
        shape: ResponseShape,
        ids: ResponseIds,
        model: str,
        *,
        status: Literal["in_progress", "queued"] = "in_progress",
    ) -> None:
        self._shape = shape
        self._status: Literal["in_progress", "queued"] = status
        self._ids = ids
        self._model = model
        self._next = 0
        self._opened = False
        self._generating = False

    def _seq(self) -> int:
        number = self._next
        self._next += 1
        return number

    def _call_event(
        self,
        kind: Literal[
            "response.image_generation_call.in_progress",
            "response.image_generation_call.generating",
            "response.image_generation_call.completed",
        ],
    ) -> ImageCallEvent:
        return ImageCallEvent(
            type=kind, sequence_number=self._seq(), output_index=_CALL, item_id=self._ids.call
        )

    def opening(self) -> list[ResponseEvent]:
        """``created``, ``in_progress``, the call item added, the call in progress (once)."""
        if self._opened:
            return []
        self._opened = True
        created = pending_response(self._shape, self._ids, model=self._model, status=self._status)
        pending = pending_response(self._shape, self._ids, model=self._model)
        return [
            LifecycleEvent(type="response.created", sequence_number=self._seq(), response=created),
            LifecycleEvent(
                type="response.in_progress", sequence_number=self._seq(), response=pending
            ),
            OutputItemEvent(
                type="response.output_item.added",
                sequence_number=self._seq(),
                output_index=_CALL,
                item=pending_call(self._shape, self._ids),
            ),
            self._call_event("response.image_generation_call.in_progress"),
        ]

    def generating(self) -> list[ResponseEvent]:
        """The provider is at work: ``….generating`` (once), after the opening."""
        events = self.opening()
        if not self._generating:
            self._generating = True
            events.append(self._call_event("response.image_generation_call.generating"))
        return events

    def partial_image(self, b64: str, index: int) -> list[ResponseEvent]:
        events = self.generating()
        preview = self._shape.preview
        events.append(
            PartialImageEvent(
                sequence_number=self._seq(),
                output_index=_CALL,
                item_id=self._ids.call,
                partial_image_b64=b64,
                partial_image_index=index,
                size=preview["size"],
                quality=preview["quality"],
                background=preview["background"],
                output_format=preview["output_format"],
            )
        )
        return events

    def completed(self, response: ResponseObject) -> list[ResponseEvent]:
        """The finished call, the assistant message as text events, ``response.completed``."""
        events = self.generating()
        call, message = response.output
        assert isinstance(call, ImageGenerationCallItem)
        assert isinstance(message, OutputMessage)
        text = message.content[0]
        empty = OutputText(text="")
        events.extend(
            [
                self._call_event("response.image_generation_call.completed"),
                self._item("response.output_item.done", _CALL, call),
                self._item(
                    "response.output_item.added",
                    _MESSAGE,
                    message.model_copy(update={"status": "in_progress", "content": []}),
                ),
                self._part("response.content_part.added", empty),
                TextDeltaEvent(
                    sequence_number=self._seq(),
                    output_index=_MESSAGE,
                    item_id=message.id,
                    delta=text.text,
                ),
                TextDoneEvent(
                    sequence_number=self._seq(),
                    output_index=_MESSAGE,
                    item_id=message.id,
                    text=text.text,
                ),
                self._part("response.content_part.done", text),
                self._item("response.output_item.done", _MESSAGE, message),
                LifecycleEvent(
                    type="response.completed", sequence_number=self._seq(), response=response
                ),
            ]
        )
        return events

    def failed(self, response: ResponseObject) -> list[ResponseEvent]:
        """``response.failed`` (after the opening, if nothing was sent yet)."""
        events = self.opening()
        events.append(
            LifecycleEvent(type="response.failed", sequence_number=self._seq(), response=response)
        )
        return events

    def _item(
        self,
        kind: Literal["response.output_item.added", "response.output_item.done"],
        index: int,
        item: OutputItem,
    ) -> OutputItemEvent:
        return OutputItemEvent(
            type=kind, sequence_number=self._seq(), output_index=index, item=item
        )

    def _part(
        self,
        kind: Literal["response.content_part.added", "response.content_part.done"],
        part: OutputText,
    ) -> ContentPartEvent:
        return ContentPartEvent(
            type=kind,
            sequence_number=self._seq(),
            output_index=_MESSAGE,
            item_id=self._ids.message,
            part=part,
        )
