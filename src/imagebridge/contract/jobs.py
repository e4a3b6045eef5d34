"""Durable job shapes."""

from __future__ import annotations

from pydantic import Field

from imagebridge.contract._base import (
    U32,
    U64,
    ContractModel,
    RequestModel,
    StrictBool,
    StrictStr,
    omit_none,
)
from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import BridgeErrorBody, ImageResponse

__all__ = [
    "ImageJob",
    "ImageJobPage",
    "ImageJobProgress",
    "ImageJobSummary",
    "ImageJobUpdate",
]


class ImageJobProgress(ContractModel):
    stage: StrictStr
    partial_images: U32 = 0


class ImageJobSummary(ContractModel):
    """What a history listing shows of one job (never the request)."""

    id: StrictStr
    status: ImageJobStatus
    created: U64
    updated: U64
    started: U64 | None = Field(default=None, exclude_if=omit_none)
    completed: U64 | None = Field(default=None, exclude_if=omit_none)
    progress: ImageJobProgress | None = Field(default=None, exclude_if=omit_none)
    favorite: StrictBool = False
    deleted: U64 | None = Field(default=None, exclude_if=omit_none)


class ImageJob(ImageJobSummary):
    """Complete job detail: the stored request, and the result or error once terminal."""

    request: ImageRequest
    result: ImageResponse | None = Field(default=None, exclude_if=omit_none)
    error: BridgeErrorBody | None = Field(default=None, exclude_if=omit_none)
    cancel_requested: StrictBool = False

    def summary(self) -> ImageJobSummary:
        return ImageJobSummary.model_validate(
            self.model_dump(include=set(ImageJobSummary.model_fields))
        )


class ImageJobPage(ContractModel):
    items: list[ImageJobSummary]
    next_cursor: StrictStr | None = Field(default=None, exclude_if=omit_none)


class ImageJobUpdate(RequestModel):
    """Mutable history fields: favourite marker and soft delete."""

    favorite: StrictBool | None = Field(default=None, exclude_if=omit_none)
    deleted: StrictBool | None = Field(default=None, exclude_if=omit_none)
