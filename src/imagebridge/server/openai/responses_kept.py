"""Kept responses: a ``Response`` is a view of its history record (docs/api-decisions.md,
"Responses", "Kept responses").

``store`` (default ``true``, as at OpenAI) keeps a response: one row of the response store
(:mod:`imagebridge.storage.response_store`) names its ids, its owner, its shape and the
history record that holds its work — a synchronous request's record (issue 39) or a
background response's durable job. Nothing else is copied: the status, the usage and the
image (its kept artifact, read back as base64) come from the record when the response is
read, so any instance on the same database and artifact store answers for a response made
on another. ``store: false`` keeps no row: such a response is never retrievable.

This module saves the rows, reads them back as OpenAI's ``Response``
(:func:`kept_response`) and resolves what a follow-up names (``previous_response_id``,
``item_reference``) to the image it edits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from starlette.requests import Request

from imagebridge.application.job_services import JobServices
from imagebridge.contract.enums import ImageJobStatus, ResponseFormat
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.openai.responses import ResponsesCreateRequest
from imagebridge.contract.openai.responses_input import (
    ImageSource,
    call_image,
    item_references,
)
from imagebridge.contract.openai.responses_output import (
    ImageGenerationCallItem,
    ResponseIds,
    ResponseObject,
    ResponseShape,
    failed_response,
    finished_response,
    pending_call,
    pending_response,
)
from imagebridge.contract.request import ImageInput
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.jobs.sync_records import record_error
from imagebridge.server.context import request_context
from imagebridge.server.joins import RECORD_HEADER
from imagebridge.server.replay import replayed_response
from imagebridge.server.state import BridgeState
from imagebridge.storage.records import JobOrigin, JobRecord, ResponseRecord

__all__ = [
    "History",
    "KeptResponse",
    "find_kept",
    "gather_kept",
    "ids_of",
    "kept_response",
    "not_found",
    "now",
    "record_of",
    "resolve_history",
    "save_kept",
    "services",
    "settled",
]

PREVIOUS = (
    "previous_response_id must name a response this key kept (store: true, not deleted) "
    "that holds an image"
)


def not_found() -> BridgeError:
    """Another key's id, an unknown, deleted or never-kept one: all the same 404."""
    return BridgeError.invalid_request("response was not found", resource="response")


def services(state: BridgeState) -> JobServices | None:
    return state.jobs


def ids_of(kept: ResponseRecord) -> ResponseIds:
    return ResponseIds(
        response=kept.id, call=kept.call_id, message=kept.message_id, created_at=kept.created_at
    )


def record_of(request: Request) -> str | None:
    """The history record the request's image work wrote (its ``x-imagebridge-record``)."""
    for name, value in request_context(request).marks:
        if name == RECORD_HEADER:
            return value.decode("ascii")
    return None


async def save_kept(
    state: BridgeState,
    owner: str,
    job_id: str,
    ids: ResponseIds,
    shape: ResponseShape,
    *,
    background: bool = False,
) -> ResponseRecord | None:
    """Keep a response whose work is the record ``job_id``; the response already kept for
    that record when there is one (a joined retry), so a retried create keeps one id."""
    jobs = services(state)
    if jobs is None:
        return None
    record = ResponseRecord(
        id=ids.response,
        auth_scope=owner,
        job_id=job_id,
        call_id=ids.call,
        message_id=ids.message,
        background=background,
        created_at=ids.created_at,
        shape_json=shape.to_json(),
    )
    return await jobs.responses.save(record)


@dataclass(frozen=True, slots=True)
class KeptResponse:
    """A kept response's row and its history record as read now."""

    kept: ResponseRecord
    record: JobRecord
    answer: ImageResponse | None = None
    """The image answer, when the record's own request gave it in this process."""

    @property
    def shape(self) -> ResponseShape:
        return ResponseShape.from_json(self.kept.shape_json)


async def find_kept(state: BridgeState, owner: str, response_id: str) -> KeptResponse:
    """The response ``response_id`` of ``owner`` and its record, or a 404."""
    jobs = services(state)
    if jobs is None or not response_id.startswith("resp_") or len(response_id) > 64:
        raise not_found()
    kept = await jobs.responses.get(owner, response_id)
    if kept is None:
        raise not_found()
    try:
        record = await jobs.job_store.get(owner, kept.job_id)
    except BridgeError as error:
        if error.details.get("resource") == "job":
            raise not_found() from None
        raise
    return KeptResponse(kept, record)


async def settled(state: BridgeState, found: KeptResponse) -> KeptResponse:
    """A synchronous response whose answer was given but whose record is still being
    written: waited for (``retrieve_wait_ms``), so a retrieve right after a create sees
    it finished. A background response is answered as it stands."""
    record = found.record
    jobs = services(state)
    if record.origin is JobOrigin.JOB or record.terminal or jobs is None:
        return found
    wait_ms = state.config.server.openai.responses.retrieve_wait_ms
    try:
        outcome = await jobs.jobs.sync_records.wait(
            record.auth_scope, record.id, Deadline.after(wait_ms / 1000), CancelToken()
        )
    except BridgeError:
        return found  # still running (a long synchronous request): in_progress
    return KeptResponse(found.kept, outcome.record, outcome.response)


async def kept_response(state: BridgeState, found: KeptResponse) -> ResponseObject:
    """OpenAI's ``Response`` for a kept response, as its record stands."""
    kept, record, shape = found.kept, found.record, found.shape
    ids = ids_of(kept)
    model = record.provider or state.runtime.registry.default
    status = record.status
    if status is ImageJobStatus.QUEUED:
        return pending_response(shape, ids, model=model, status="queued")
    if status is ImageJobStatus.RUNNING:
        pending = pending_response(shape, ids, model=model)
        pending.output = [pending_call(shape, ids)]
        return pending
    completed_at = record.completed_at or record.updated_at
    if status is ImageJobStatus.SUCCEEDED:
        answer = found.answer or await replayed_response(
            state, record, ResponseFormat.B64_JSON, link_base=None
        )
        return finished_response(shape, ids, answer, completed_at=completed_at)
    error = record_error(record)
    return failed_response(
        shape,
        ids,
        error,
        model=model,
        param=shape.param(error.field),
        completed_at=completed_at,
        status="cancelled" if status is ImageJobStatus.CANCELLED else "failed",
    )


# -- follow-ups ------------------------------------------------------------------------------


def _image_of(answer: ResponseObject) -> ImageInput | None:
    for item in answer.output:
        if isinstance(item, ImageGenerationCallItem) and item.result is not None:
            return call_image(item.result, item.output_format)
    return None


async def _kept_image(state: BridgeState, owner: str, kept: ResponseRecord) -> ImageInput | None:
    try:
        found = await settled(state, await find_kept(state, owner, kept.id))
    except BridgeError as error:
        if error.details.get("resource") == "response":
            return None
        raise
    if found.record.status is not ImageJobStatus.SUCCEEDED:
        return None
    return _image_of(await kept_response(state, found))


@dataclass(frozen=True, slots=True)
class History:
    """What a follow-up names of the caller's kept responses."""

    previous: ImageSource | None = None
    """The image ``previous_response_id`` names."""
    references: dict[str, ImageSource] = field(default_factory=dict)
    """The images ``item_reference`` items name, by ``ig_…`` id."""
    conversation: str | None = None
    """The persistent session the ``previous_response_id`` response ran under, if any
    (:mod:`imagebridge.server.openai.responses_sessions`)."""


async def resolve_history(state: BridgeState, owner: str, body: ResponsesCreateRequest) -> History:
    """The image ``previous_response_id`` names (and its conversation), and the images the
    input's ``item_reference`` items name by their ``image_generation_call`` id (``ig_…``),
    read from the caller's kept responses. An unusable ``previous_response_id`` is a 400
    naming it; an ``item_reference`` not found is refused by the input's reading."""
    previous: ImageSource | None = None
    conversation: str | None = None
    jobs = services(state)
    if body.previous_response_id is not None:
        kept = None
        if jobs is not None and len(body.previous_response_id) <= 64:
            kept = await jobs.responses.get(owner, body.previous_response_id)
        image = await _kept_image(state, owner, kept) if kept is not None else None
        if image is None or kept is None:
            raise BridgeError.unsupported(PREVIOUS, field="previous_response_id")
        previous = ImageSource("previous_response_id", image)
        conversation = ResponseShape.from_json(kept.shape_json).conversation
    references: dict[str, ImageSource] = {}
    named = [ident for ident in item_references(body.input) if ident.startswith("ig_")]
    limit = state.config.server.openai.responses.max_item_references
    if len(named) > limit:
        raise BridgeError.invalid_request(
            f"input names at most {limit} item_reference items", field="input"
        )
    if jobs is None:
        return History(previous, references, conversation)
    for ident in named:
        kept = await jobs.responses.by_call(owner, ident) if len(ident) <= 64 else None
        image = await _kept_image(state, owner, kept) if kept is not None else None
        if image is not None:
            references[ident] = ImageSource("input", image)
    return History(previous, references, conversation)


def now() -> int:
    return int(time.time())


async def gather_kept(state: BridgeState, owner: str, response_id: str) -> ResponseObject:
    """``GET /v1/responses/{id}``'s answer."""
    found = await settled(state, await find_kept(state, owner, response_id))
    return await kept_response(state, found)
