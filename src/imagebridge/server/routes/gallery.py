"""``GET /v1/gallery``: the caller's history as images, newest first (an addition).

The dashboard's gallery reads it a cursor page at a time; any client may. Items are images
(one per stored output, a request of many images giving many items in a row) with the history
row each came from; a row without an image yet (queued, running, failed) is one item without
one. It takes the filters of ``GET /v1/jobs`` (status, visibility, favourite, search) and the
admin's ``?key=`` read-only view of one API key's work. Images and thumbnails are then read
with ``GET /v1/artifacts/{id}`` and its ``/thumbnail``. docs/api-decisions.md, "The gallery".
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.gallery import GalleryPage
from imagebridge.jobs.gallery import INVALID_GALLERY_QUERY, gallery_page, gallery_query
from imagebridge.server.openapi import ERROR_RESPONSES, query_parameter
from imagebridge.server.query import (
    MAX_CURSOR_CHARS,
    MAX_PAGE_LIMIT,
    integer_parameter,
    strict_query,
)
from imagebridge.server.routes import OFFLOAD_BYTES, json_response, protected_router
from imagebridge.server.scope import KEY_FILTER, reading_owner
from imagebridge.server.state import bridge_state
from imagebridge.storage.interfaces import JobStore

router = protected_router(tags=["gallery"])

_QUERY_KEYS = ("limit", "cursor", "status", "visibility", "favorite", "search", KEY_FILTER)
_PARAMETERS = [
    query_parameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT}),
    query_parameter("cursor", {"type": "string", "maxLength": MAX_CURSOR_CHARS}),
    query_parameter("status", {"enum": [status.value for status in ImageJobStatus]}),
    query_parameter("visibility", {"enum": ["active", "hidden", "all"]}),
    query_parameter("favorite", {"type": "boolean"}),
    query_parameter("search", {"type": "string", "maxLength": 512}),
]


def _history(request: Request) -> JobStore:
    services = bridge_state(request).jobs
    if services is None:  # the app was not started through its lifespan
        raise BridgeError(ErrorCode.OVERLOADED, "durable job store is not open", retryable=True)
    return services.job_store


def _flag(raw: str | None) -> bool | None:
    if raw is None:
        return None
    if raw not in ("true", "false"):
        raise BridgeError.invalid_request(INVALID_GALLERY_QUERY, field="favorite")
    return raw == "true"


@router.get(
    "/v1/gallery",
    operation_id="listGalleryImages",
    response_class=Response,
    responses={200: {"model": GalleryPage, "description": "Gallery page"}, **ERROR_RESPONSES},
    openapi_extra={"parameters": _PARAMETERS},
)
async def list_gallery(request: Request) -> Response:
    query = strict_query(request, _QUERY_KEYS, INVALID_GALLERY_QUERY)
    checked = gallery_query(
        limit=integer_parameter(query.get("limit"), invalid=INVALID_GALLERY_QUERY),
        cursor=query.get("cursor"),
        status=query.get("status"),
        visibility=query.get("visibility"),
        favorite=_flag(query.get("favorite")),
        search=query.get("search"),
    )
    page = await gallery_page(_history(request), reading_owner(request, query), checked)
    if sum(len(job.prompt) for job in page.jobs) <= OFFLOAD_BYTES:
        return json_response(page)
    # Prompts may be up to runtime.request.max_prompt_bytes each: a page of long ones is
    # serialized off the event loop.
    body = await asyncio.to_thread(page.model_dump_json)
    return Response(body, media_type="application/json")
