"""The gallery: a caller's history read as images, newest first, a cursor page at a time.

A page is built from the job history itself (:class:`~imagebridge.storage.interfaces.JobStore`
``list`` then ``get`` per row), so every kind of history row appears, whatever surface made
it: a row with stored images gives one item per image (in output order), a row without one
gives a single item without an image. The history's own filters (status, visibility,
favourite, prompt search) apply as they do to ``GET /v1/jobs``.

The cursor names where the previous page stopped: a row (its creation time and id, the
history's own order) and the position of the next image in it, so a page may end in the
middle of a request of many images and the next one resumes there. Position 0 means "after
this row". Cursors are base64url without padding over ``"<created>:<id>:<position>"`` and
decoded strictly, like the history's.

Reading a row's request and result is JSON parsing of text that may hold megabytes of inline
input images, so each page's rows are parsed in a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from imagebridge.contract.enums import ImageJobStatus, OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.gallery import (
    GalleryError,
    GalleryImage,
    GalleryItem,
    GalleryJob,
    GalleryPage,
)
from imagebridge.contract.jobs import ImageJobProgress
from imagebridge.jobs.query import JobQuery, job_query
from imagebridge.storage.cursors import MAX_CURSOR_CHARS, encode_job_cursor
from imagebridge.storage.interfaces import JobStore
from imagebridge.storage.records import JobRecord, JobVisibility
from imagebridge.storage.rules.pages import MAX_PAGE_LIMIT
from imagebridge.storage.rules.values import MAX_INTEGER, is_canonical_uuid

__all__ = [
    "INVALID_GALLERY_QUERY",
    "GalleryQuery",
    "decode_gallery_cursor",
    "encode_gallery_cursor",
    "gallery_page",
    "gallery_query",
]

INVALID_GALLERY_QUERY = "gallery query parameters are invalid"
_MALFORMED = "gallery cursor is malformed"
_ALPHABET = re.compile(r"[A-Za-z0-9_-]+")
_PAYLOAD = re.compile(r"(0|[1-9][0-9]{0,18}):([0-9a-f-]{36}):(0|[1-9][0-9]{0,4})")
_MAX_POSITION = 65_535


@dataclass(frozen=True, slots=True)
class GalleryCursor:
    """Where a page resumes: the row ``(created, job_id)`` and its next image ``position``
    (0: the row is done, resume after it)."""

    created: int
    job_id: str
    position: int


@dataclass(frozen=True, slots=True)
class GalleryQuery:
    """A checked gallery query: the history's filters, a page size in images, a resume point."""

    history: JobQuery
    resume: GalleryCursor | None = None

    @property
    def limit(self) -> int:
        return self.history.limit


def encode_gallery_cursor(created: int, job_id: str, position: int) -> str:
    payload = f"{created}:{job_id}:{position}".encode()
    return base64.urlsafe_b64encode(payload).rstrip(b"=").decode("ascii")


def decode_gallery_cursor(raw: object) -> GalleryCursor:
    """The resume point a cursor names; anything but a canonical cursor is refused (422)."""
    if (
        isinstance(raw, str)
        and len(raw) <= MAX_CURSOR_CHARS
        and _ALPHABET.fullmatch(raw) is not None
        and len(raw) % 4 != 1
    ):
        try:
            payload = base64.b64decode(raw + "=" * (-len(raw) % 4), altchars=b"-_", validate=True)
            match = _PAYLOAD.fullmatch(payload.decode("ascii"))
        except (binascii.Error, ValueError):
            match = None
        if match is not None:
            created, job_id, position = int(match[1]), match[2], int(match[3])
            if (
                created <= MAX_INTEGER
                and is_canonical_uuid(job_id)
                and position <= _MAX_POSITION
                and encode_gallery_cursor(created, job_id, position) == raw
            ):
                return GalleryCursor(created, job_id, position)
    raise BridgeError.invalid_request(_MALFORMED, field="cursor")


def gallery_query(
    *,
    limit: int | None = None,
    cursor: str | None = None,
    status: ImageJobStatus | str | None = None,
    visibility: JobVisibility | str | None = None,
    favorite: bool | None = None,
    search: str | None = None,
) -> GalleryQuery:
    """Check every value (``None``: absent) with the history's own rules; ``limit`` counts
    items (images), at most the history's page limit."""
    history = job_query(
        limit=limit, status=status, visibility=visibility, favorite=favorite, search=search
    )
    resume = None if cursor is None else decode_gallery_cursor(cursor)
    return GalleryQuery(history=history, resume=resume)


# -- one row as gallery entries ----------------------------------------------------------------


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


_IMAGE_COUNTS = ("index", "width", "height", "bytes")


def _images(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The result's stored images in output order (inline outputs have no artifact to show),
    checked by shape only: a page builds the few it shows (:func:`_image`)."""
    found: list[dict[str, Any]] = []
    formats = {item.value for item in OutputFormat}
    for item in response.get("data") or ():
        entry = _mapping(item)
        if (
            entry.get("type") == "artifact"
            and isinstance(entry.get("id"), str)
            and isinstance(entry.get("name"), str)
            and entry.get("format") in formats
            and all(
                isinstance(entry.get(key), int) and not isinstance(entry.get(key), bool)
                for key in _IMAGE_COUNTS
            )
        ):
            found.append(entry)  # anything else was written by something else: not shown
    return found


def _image(entry: dict[str, Any]) -> GalleryImage:
    try:
        return GalleryImage.model_validate({key: entry[key] for key in GalleryImage.model_fields})
    except ValidationError as exc:
        raise BridgeError(
            ErrorCode.INTERNAL, "durable job record could not be read", details={"part": "image"}
        ) from exc


def _row(record: JobRecord) -> tuple[GalleryJob, list[dict[str, Any]]]:
    """Blocking (JSON of a request that may hold inline images): a row as the gallery shows it."""
    try:
        request = record.request()
        response = _mapping(record.response())
        error = _mapping(record.error())
    except ValueError as exc:
        raise BridgeError(
            ErrorCode.INTERNAL,
            "durable job record could not be read",
            details={"job_id": record.id, "part": "gallery"},
        ) from exc
    routing = _mapping(request.get("routing"))
    parameters = _mapping(request.get("parameters"))
    requested = parameters.get("n")
    prompt = request.get("prompt")
    images = _images(response)
    job = GalleryJob(
        id=record.id,
        status=record.status,
        created=record.created_at,
        updated=record.updated_at,
        favorite=record.favorite,
        deleted=record.deleted_at,
        cancel_requested=record.cancel_requested,
        progress=(
            None
            if record.progress_stage is None
            else ImageJobProgress(stage=record.progress_stage, partial_images=record.partial_images)
        ),
        operation=_text(request.get("operation")) or "generate",
        prompt=prompt if isinstance(prompt, str) else "",
        provider=(
            _text(response.get("provider"))
            or _text(error.get("provider"))
            or _text(routing.get("provider"))
        ),
        model=_text(response.get("model")) or _text(routing.get("model")),
        requested=requested if isinstance(requested, int) and requested >= 1 else 1,
        images=len(images),
        error=(
            GalleryError(code=str(error.get("code", "")), message=str(error.get("message", "")))
            if error
            else None
        ),
    )
    return job, images


def _matches(record: JobRecord, history: JobQuery) -> bool:
    """Whether the row a cursor resumes in still passes the page's filters."""
    if history.visibility is JobVisibility.ACTIVE and record.deleted_at is not None:
        return False
    if history.visibility is JobVisibility.HIDDEN and record.deleted_at is None:
        return False
    if history.favorite is not None and record.favorite != history.favorite:
        return False
    return history.status is None or record.status is history.status


# -- a page ------------------------------------------------------------------------------------


class _Builder:
    """Items and rows of one page, and where it stops."""

    def __init__(self, limit: int) -> None:
        self.remaining = limit
        self.items: list[GalleryItem] = []
        self.jobs: dict[str, GalleryJob] = {}

    def add(self, job: GalleryJob, images: list[dict[str, Any]], start: int) -> int | None:
        """Add the row's entries from ``start``; the position to resume at when they did
        not all fit, else ``None``."""
        self.jobs.setdefault(job.id, job)
        if not images:
            if start == 0:
                self.items.append(GalleryItem(job=job.id, position=0))
                self.remaining -= 1
            return None
        end = min(len(images), start + self.remaining)
        for position in range(start, end):
            image = _image(images[position])
            self.items.append(GalleryItem(job=job.id, position=position, image=image))
        self.remaining -= end - start
        return end if end < len(images) else None

    def page(self, next_cursor: str | None) -> GalleryPage:
        return GalleryPage(items=self.items, jobs=list(self.jobs.values()), next_cursor=next_cursor)


async def _record(store: JobStore, scope: str, job_id: str) -> JobRecord | None:
    try:
        return await store.get(scope, job_id)
    except BridgeError as error:
        if error.details.get("resource") == "job":  # gone since it was listed: skip it
            return None
        raise


async def gallery_page(store: JobStore, scope: str, query: GalleryQuery) -> GalleryPage:
    """One page of ``scope``'s history as images, newest row first."""
    history = query.history
    built = _Builder(query.limit)
    after: tuple[int, str] | None = None
    """The last row shown whole: the next page starts after it."""
    resume = query.resume
    if resume is not None:
        after = (resume.created, resume.job_id)
        record = await _record(store, scope, resume.job_id) if resume.position else None
        if record is not None and _matches(record, history):
            job, images = await asyncio.to_thread(_row, record)
            stopped = built.add(job, images, resume.position)
            if stopped is not None:
                return built.page(encode_gallery_cursor(record.created_at, record.id, stopped))
    job_cursor = None if after is None else encode_job_cursor(*after)
    while True:
        # One row more than fits: when it exists, another page follows.
        listed = await store.list(
            scope,
            visibility=history.visibility,
            status=history.status,
            favorite=history.favorite,
            search=history.search,
            cursor=job_cursor,
            limit=min(built.remaining + 1, MAX_PAGE_LIMIT),
        )
        for summary in listed.items:
            if built.remaining == 0 and after is not None:
                return built.page(encode_gallery_cursor(*after, 0))
            record = await _record(store, scope, summary.id)
            if record is None:
                continue
            job, images = await asyncio.to_thread(_row, record)
            stopped = built.add(job, images, 0)
            if stopped is not None:
                return built.page(encode_gallery_cursor(record.created_at, record.id, stopped))
            after = (record.created_at, record.id)
        if listed.next_cursor is None:
            return built.page(None)
        job_cursor = listed.next_cursor
