"""Incremental provider events, as carried by SSE streams and job progress."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from imagebridge.contract._base import U8, ContractModel, StrictStr
from imagebridge.contract.response import ImageResponse

__all__ = [
    "CompletedEvent",
    "PartialImageEvent",
    "ProgressEvent",
    "ProviderEvent",
    "StartedEvent",
    "provider_event_adapter",
]


class StartedEvent(ContractModel):
    type: Literal["started"] = "started"


class ProgressEvent(ContractModel):
    """Textual progress; the stage label never contains prompts or credentials."""

    type: Literal["progress"] = "progress"
    stage: StrictStr


class PartialImageEvent(ContractModel):
    type: Literal["partial_image"] = "partial_image"
    index: U8
    partial_index: U8
    b64_json: StrictStr


class CompletedEvent(ContractModel):
    type: Literal["completed"] = "completed"
    response: ImageResponse


ProviderEvent = Annotated[
    StartedEvent | ProgressEvent | PartialImageEvent | CompletedEvent,
    Field(discriminator="type"),
]

provider_event_adapter: TypeAdapter[ProviderEvent] = TypeAdapter(ProviderEvent)
