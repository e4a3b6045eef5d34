"""The gallery: the images of a caller's history, newest first (``GET /v1/gallery``).

An addition of imagebridge (the original has no such route), so these objects are our own
and no strict client of the original decodes them. A page lists *images*, not jobs: each
item is one delivered image with the id of the history row that made it, and a row that has
no image (queued, running, failed, cancelled, or every output failed) is one item without
an image, so the work in progress and its failures stay visible. The rows an item names are
listed once per page under ``jobs``, with what a grid needs to show and filter them; the
full row (its request and result) is ``GET /v1/jobs/{id}``.
"""

from __future__ import annotations

from pydantic import Field

from imagebridge.contract._base import (
    U8,
    U32,
    U64,
    ContractModel,
    StrictBool,
    StrictStr,
    omit_none,
)
from imagebridge.contract.enums import ImageJobStatus, OutputFormat
from imagebridge.contract.jobs import ImageJobProgress

__all__ = ["GalleryError", "GalleryImage", "GalleryItem", "GalleryJob", "GalleryPage"]


class GalleryImage(ContractModel):
    """One delivered image, as stored: fetch it with ``GET /v1/artifacts/{id}``."""

    id: StrictStr
    index: U8
    """The output's index in its request (``data[].index`` of the result)."""
    name: StrictStr
    format: OutputFormat
    width: U32
    height: U32
    bytes: U64


class GalleryItem(ContractModel):
    """One tile: an image of the row ``job``, or the row itself while it has none."""

    job: StrictStr
    """The id of the history row (``GET /v1/jobs/{id}``)."""
    position: U32
    """0-based place of the image among its row's delivered images (0 without an image)."""
    image: GalleryImage | None = Field(default=None, exclude_if=omit_none)


class GalleryError(ContractModel):
    code: StrictStr
    message: StrictStr


class GalleryJob(ContractModel):
    """What the gallery shows of one history row (the same names as ``ImageJob``)."""

    id: StrictStr
    status: ImageJobStatus
    created: U64
    updated: U64
    favorite: StrictBool = False
    deleted: U64 | None = Field(default=None, exclude_if=omit_none)
    cancel_requested: StrictBool = False
    progress: ImageJobProgress | None = Field(default=None, exclude_if=omit_none)
    operation: StrictStr
    prompt: StrictStr
    provider: StrictStr | None = Field(default=None, exclude_if=omit_none)
    """The provider that answered, else the one the request was routed to."""
    model: StrictStr | None = Field(default=None, exclude_if=omit_none)
    requested: U32
    """How many images the request asked for (``parameters.n``)."""
    images: U32
    """How many of them were delivered as stored images."""
    error: GalleryError | None = Field(default=None, exclude_if=omit_none)


class GalleryPage(ContractModel):
    items: list[GalleryItem]
    jobs: list[GalleryJob]
    """Every row the page's items name, once, in the items' order."""
    next_cursor: StrictStr | None = Field(default=None, exclude_if=omit_none)
