"""A synchronous request with a history: lead its own record, or join the one it repeats.

Every synchronous request leaves a record (:mod:`imagebridge.jobs.sync_records`). Before
anything runs, the request looks for the generation it repeats:

* its ``Idempotency-Key`` names a record already (the same owner; any instance on a shared
  database): join it; the same key with another request is 409 ``idempotency_conflict``;
* it carries no key but is marked as a retry by an OpenAI SDK (``x-stainless-retry-count``
  of 1 or more; the Python and Node SDKs send it on every attempt, LiteLLM through the
  Python SDK): join the newest record of the same owner, route and request started within
  ``server.sync.retry_join_window_secs``. A request not marked as a retry is never merged:
  two identical prompts are two images.

Joining waits for a running record (in-process when it runs here, else by reading it),
then answers its images in this caller's format, marked ``x-imagebridge-replay: true`` (and,
on the native stream, whose headers are already sent, by a ``progress`` event with stage
``replay``); nothing is reserved or charged, and a key's usage row counts them
``replayed``. A record that ended before anything was paid for does not hold a retry back:
the retry runs on its own. Otherwise the request leads: its record is ``running`` while the
engine runs it (``x-imagebridge-record: <id>``; without a key it is written while the
engine's first steps run, which nothing needs to wait for) and every image is kept as an
artifact whatever the response format. A failure is written at once; a success is answered first
(retries waiting here get it at the same moment), then its inline images are published and
its record written, still inside the request (``RequestContext.deferred``), so the caller
does not wait for those writes and the shutdown drain does.

When the history's database does not answer (a PostgreSQL restart), the request is not
refused: it runs without a record, as it would without a history, its images still kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from starlette.requests import Request

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import ProgressEvent
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.keep import KeptImages
from imagebridge.jobs.execution import SHUTDOWN_REASON
from imagebridge.jobs.shared_mode import CANCEL_REASON
from imagebridge.jobs.sync_records import (
    JoinState,
    SyncLead,
    SyncOutcome,
    SyncRecords,
    SyncRequest,
    join_state,
    record_error,
)
from imagebridge.server.replay import REPLAY_HEADER, replayed_response
from imagebridge.server.sync_call import SyncCall
from imagebridge.storage.records import JobRecord

__all__ = ["RECORD_HEADER", "RETRY_COUNT_HEADER", "answer_with_history", "retry_count"]

logger = logging.getLogger("imagebridge.server")

RETRY_COUNT_HEADER = "x-stainless-retry-count"
"""The OpenAI SDKs' attempt number (0 on the first attempt, 1 and up on retries)."""
RECORD_HEADER = b"x-imagebridge-record"
"""The history record a synchronous answer belongs to (``GET /v1/jobs/{id}``)."""
REPLAY_STAGE = "replay"
"""The ``progress`` stage that marks a native stream answering an earlier generation."""
_MAX_RETRY_COUNT_CHARS = 9


def retry_count(request: Request) -> int:
    """The request's ``x-stainless-retry-count`` (0 when absent or not a small number)."""
    values = request.headers.getlist(RETRY_COUNT_HEADER)
    if len(values) != 1:
        return 0
    raw = values[0].strip()
    if not raw.isascii() or not raw.isdigit() or len(raw) > _MAX_RETRY_COUNT_CHARS:
        return 0
    return int(raw)


async def answer_with_history(call: SyncCall, records: SyncRecords) -> ImageResponse:
    """Lead the request's own record, or join the record it repeats (module docstring)."""
    request = call.image_request
    key = request.idempotency_key
    prepared = await records.prepare(request, call.origin)
    found: JobRecord | None = None
    try:
        if key is None and retry_count(call.http) >= 1:
            found = await records.find_retry(call.owner, prepared)
        if found is None and key is None:
            # Nothing to decide: the record is written while the engine's first steps run.
            pending = asyncio.ensure_future(records.begin(call.owner, prepared))
            return await _lead(call, records, pending)
        if found is None:  # the unique index decides which request of a key leads
            begun = await records.begin(call.owner, prepared, key=key)
            if isinstance(begun, SyncLead):
                return await _lead(call, records, _done(begun))
            found = begun
    except BridgeError as error:
        if not _history_away(error):
            raise
        return await _without_history(call, error)
    return await _follow(call, records, prepared, found)


def _done(lead: SyncLead) -> asyncio.Future[SyncLead | JobRecord]:
    future: asyncio.Future[SyncLead | JobRecord] = asyncio.get_running_loop().create_future()
    future.set_result(lead)
    return future


def _history_away(error: BridgeError) -> bool:
    """The history's database did not answer (before anything ran): a storage refusal."""
    return error.retryable and error.details.get("storage") == "database"


async def _without_history(call: SyncCall, error: BridgeError) -> ImageResponse:
    """The database is away for a moment: the request runs as it would without a history
    (the engine's in-process cache answers a repeated key), and its images are still kept
    as artifacts under the caller; it has no record, so nothing lists it and no retry on
    another instance can join it. Generation does not stop for a database restart."""
    _no_record(call, error)
    keep = KeptImages()
    response = await call.run(keep=keep)
    _keep_later(call, keep)
    return response


def _no_record(call: SyncCall, error: BridgeError) -> None:
    logger.warning(
        "the job history did not answer; this synchronous request runs without a record",
        extra={"code": error.code.value, "request_id": call.context.request_id},
    )


def _keep_later(call: SyncCall, keep: KeptImages) -> None:
    """Publish the held images once the caller has its answer (no record to write)."""

    async def keep_images() -> None:
        await keep.publish_held(call.state.runtime.materializer.artifacts, call.owner)

    call.context.deferred.append(keep_images)


async def _lead(
    call: SyncCall, records: SyncRecords, pending: asyncio.Future[SyncLead | JobRecord]
) -> ImageResponse:
    """Run the request as its record's leader. ``pending`` is the record being written
    (already written for a keyed request): it is marked, and ``DELETE`` reaches the work,
    as soon as it exists; the outcome is written once both the record and the engine
    are done."""
    unlinks: list[Callable[[], None]] = []

    def adopt(done: asyncio.Future[SyncLead | JobRecord]) -> None:
        if done.cancelled() or done.exception() is not None:
            return
        lead = done.result()
        assert isinstance(lead, SyncLead)
        call.mark(RECORD_HEADER, lead.id.encode("ascii"))

        def cancelled() -> None:  # DELETE /v1/jobs/{id}, or the job manager's shutdown
            if lead.token.reason in (CANCEL_REASON, SHUTDOWN_REASON):
                call.presence.token.cancel(lead.token.reason)

        unlinks.append(lead.token.on_cancel(cancelled))

    if pending.done():
        adopt(pending)
    else:
        pending.add_done_callback(adopt)
    keep = KeptImages()
    # The history replaces the in-memory coordinator: the engine runs the request once,
    # without its key (the record holds it).
    engine_request = call.image_request.model_copy(update={"idempotency_key": None})
    try:
        response = await call.run(request=engine_request, keep=keep)
    except BridgeError as error:
        await _finish(call, records, pending, error)
        raise
    except BaseException:
        abandoned = BridgeError(
            ErrorCode.CANCELLED, "request was abandoned while the provider may have run"
        ).mark_unknown_outcome()
        await _finish(call, records, pending, abandoned)
        raise
    finally:
        for unlink in unlinks:
            unlink()
    lead = await _written(call, pending)
    if lead is None:
        _keep_later(call, keep)
        return response
    records.answered(lead, response)

    async def keep_and_record() -> None:
        artifacts = call.state.runtime.materializer.artifacts
        await keep.publish_held(artifacts, call.owner)
        await records.finish(lead, response, kept=keep)

    call.context.deferred.append(keep_and_record)  # once the caller has its answer
    return response


async def _written(
    call: SyncCall, pending: asyncio.Future[SyncLead | JobRecord]
) -> SyncLead | None:
    """The record once written, or ``None`` when it could not be (the engine's answer
    stands: the request ran without a record)."""
    try:
        lead = await asyncio.shield(pending)
    except BridgeError as error:
        if _history_away(error):
            _no_record(call, error)
        else:
            logger.error(
                "a synchronous request's record could not be written",
                extra={"code": error.code.value, "request_id": call.context.request_id},
            )
        return None
    assert isinstance(lead, SyncLead)
    return lead


async def _finish(
    call: SyncCall,
    records: SyncRecords,
    pending: asyncio.Future[SyncLead | JobRecord],
    error: BridgeError,
) -> None:
    """Record a failure (once the record exists), whatever happens to this task."""

    async def settle() -> None:
        lead = await _written(call, pending)
        if lead is not None:
            await records.finish(lead, error)

    await asyncio.shield(settle())


async def _follow(
    call: SyncCall,
    records: SyncRecords,
    prepared: SyncRequest,
    record: JobRecord,
    *,
    again: bool = True,
) -> ImageResponse:
    call.mark(*REPLAY_HEADER)
    call.mark(RECORD_HEADER, record.id.encode("ascii"))
    if call.events is not None:
        await call.events(ProgressEvent(stage=REPLAY_STAGE))
    if record.terminal:
        outcome = SyncOutcome(record)
    else:
        waiting = records.wait(call.owner, record.id, call.deadline(), call.presence.token)
        outcome = await call.watched(waiting)
    joined = join_state(outcome.record)
    if joined is JoinState.ANSWER:
        if outcome.response is not None:
            response = outcome.response.model_copy(deep=True)
        else:
            response = await replayed_response(
                call.state,
                outcome.record,
                call.image_request.output.response_format,
                link_base=call.link_base,
            )
        call.replayed = True
        await call.count_replay(response)
        return response
    if joined is not JoinState.RUN or not again:
        raise record_error(outcome.record)
    # It ended before anything was paid for (cancelled before its provider call): this
    # request runs on its own, as if it had found nothing.
    call.unmark(REPLAY_HEADER[0])
    call.unmark(RECORD_HEADER)
    begun = await records.begin(call.owner, prepared, key=call.image_request.idempotency_key)
    if isinstance(begun, SyncLead):
        return await _lead(call, records, _done(begun))
    return await _follow(call, records, prepared, begun, again=False)
