"""``GET``, ``POST …/cancel`` and ``DELETE /v1/responses/{id}``: kept responses.

Mounted with the job history (a kept response is a view of its record). Each is scoped to
the caller: another key's id, an unknown one, a deleted one or one made with
``store: false`` is the same 404, in OpenAI's error envelope.

- ``GET`` answers the response as it stands (``queued``, ``in_progress``, then
  ``completed``, ``failed`` or ``cancelled``); with ``stream=true`` its events, from
  ``starting_after`` + 1, following the record until it ends.
- ``cancel`` is for background responses (a synchronous one is a 400, as at OpenAI): the
  job is cancelled (at once when queued, through its token or another instance's
  notification when running) and the response answered as it then stands.
- ``DELETE`` forgets the response (no longer retrievable nor usable as
  ``previous_response_id``); its history record stays, for usage and quotas.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import BridgeError
from imagebridge.server.context import request_context
from imagebridge.server.openai.responses_kept import (
    find_kept,
    gather_kept,
    not_found,
    now,
    services,
)
from imagebridge.server.openai.responses_stream import RESPONSES_SSE_EVENT_SCHEMA, resume_stream
from imagebridge.server.openapi import ERROR_RESPONSES
from imagebridge.server.query import strict_query
from imagebridge.server.routes import large_json_response, protected_router
from imagebridge.server.state import bridge_state

__all__ = ["router"]

router = protected_router(tags=["openai-compatible"])

_QUERY = frozenset({"stream", "starting_after", "include", "include_obfuscation"})
_INVALID = "query must hold only stream, starting_after, include and include_obfuscation"
NOT_BACKGROUND = "only a background response can be cancelled"
_MAX_SEQUENCE_DIGITS = 9

_ID = {"name": "response_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _starting_after(raw: str | None) -> int | None:
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > _MAX_SEQUENCE_DIGITS:
        raise BridgeError.invalid_request(
            "starting_after must be a sequence number", field="starting_after"
        )
    return int(raw)


@router.get(
    "/v1/responses/{response_id}",
    operation_id="getResponse",
    responses={
        200: {
            "description": "The kept response as it stands (with `stream=true`, its events)",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": RESPONSES_SSE_EVENT_SCHEMA},
            },
        },
        **ERROR_RESPONSES,
    },
    openapi_extra={
        "parameters": [
            _ID,
            {"name": "stream", "in": "query", "schema": {"type": "boolean"}},
            {"name": "starting_after", "in": "query", "schema": {"type": "integer"}},
        ]
    },
)
async def get_response(request: Request, response_id: str) -> Response:
    query = strict_query(request, _QUERY, _INVALID)
    stream = query.get("stream")
    if stream not in (None, "true", "false"):
        raise BridgeError.invalid_request("stream must be true or false", field="stream")
    starting_after = _starting_after(query.get("starting_after"))
    state = bridge_state(request)
    owner = request_context(request).owner
    if stream == "true":
        found = await find_kept(state, owner, response_id)  # a 404 before the stream starts
        return resume_stream(state, found, starting_after=starting_after)
    return await large_json_response(await gather_kept(state, owner, response_id))


@router.post(
    "/v1/responses/{response_id}/cancel",
    operation_id="cancelResponse",
    responses={
        200: {"description": "The response after the cancellation"},
        **ERROR_RESPONSES,
    },
    openapi_extra={"parameters": [_ID]},
)
async def cancel_response(request: Request, response_id: str) -> Response:
    state = bridge_state(request)
    owner = request_context(request).owner
    found = await find_kept(state, owner, response_id)
    if not found.kept.background:
        raise BridgeError.unsupported(NOT_BACKGROUND, field="response_id")
    jobs = services(state)
    assert jobs is not None  # find_kept found it
    if not found.record.terminal:
        await jobs.jobs.cancel(owner, found.record.id)
    return await large_json_response(await gather_kept(state, owner, response_id))


@router.delete(
    "/v1/responses/{response_id}",
    operation_id="deleteResponse",
    responses={
        200: {"description": "`{id, object: response.deleted, deleted: true}`"},
        **ERROR_RESPONSES,
    },
    openapi_extra={"parameters": [_ID]},
)
async def delete_response(request: Request, response_id: str) -> Response:
    state = bridge_state(request)
    owner = request_context(request).owner
    jobs = services(state)
    if jobs is None or not await jobs.responses.delete(owner, response_id, now=now()):
        raise not_found()
    body = {"id": response_id, "object": "response.deleted", "deleted": True}
    return Response(json.dumps(body), media_type="application/json")
