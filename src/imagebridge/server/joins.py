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
engine runs it (``x-imagebridge-record: <id>``) and every image is kept as an artifact
whatever the response format. A failure is written at once; a success is answered first
(retries waiting here get it at the same moment), then its inline images are published and
its record written, still inside the request (``RequestContext.deferred``), so the caller
does not wait for those writes and the shutdown drain does.
"""

from __future__ import annotations

import asyncio

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
    prepared = await records.prepare(request, call.origin)
    found: JobRecord | None = None
    if request.idempotency_key is None and retry_count(call.http) >= 1:
        found = await records.find_retry(call.owner, prepared)
    if found is None:
        begun = await records.begin(call.owner, prepared, key=request.idempotency_key)
        if isinstance(begun, SyncLead):
            return await _lead(call, records, begun)
        found = begun
    return await _follow(call, records, prepared, found)


async def _lead(call: SyncCall, records: SyncRecords, lead: SyncLead) -> ImageResponse:
    call.mark(RECORD_HEADER, lead.id.encode("ascii"))

    def cancelled() -> None:  # DELETE /v1/jobs/{id}, or the job manager's shutdown
        if lead.token.reason in (CANCEL_REASON, SHUTDOWN_REASON):
            call.presence.token.cancel(lead.token.reason)

    unlink = lead.token.on_cancel(cancelled)
    keep = KeptImages()
    # The history replaces the in-memory coordinator: the engine runs the request once,
    # without its key (the record holds it).
    engine_request = call.image_request.model_copy(update={"idempotency_key": None})
    try:
        response = await call.run(request=engine_request, keep=keep, record_events=lead.events)
    except BridgeError as error:
        await asyncio.shield(records.finish(lead, error))
        raise
    except BaseException:
        abandoned = BridgeError(
            ErrorCode.CANCELLED, "request was abandoned while the provider may have run"
        ).mark_unknown_outcome()
        await asyncio.shield(records.finish(lead, abandoned))
        raise
    finally:
        unlink()
    records.answered(lead, response)

    async def keep_and_record() -> None:
        artifacts = call.state.runtime.materializer.artifacts
        await keep.publish_held(artifacts, call.owner)
        await records.finish(lead, response, kept=keep)

    call.context.deferred.append(keep_and_record)  # once the caller has its answer
    return response


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
        return await _lead(call, records, begun)
    return await _follow(call, records, prepared, begun, again=False)
