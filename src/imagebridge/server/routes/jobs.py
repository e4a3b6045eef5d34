"""Durable jobs: create, list, detail, cancel, history updates, partial previews.

Every call acts within the caller's ownership scope: another bearer's job is simply not
found. The job manager forces artifact delivery, validates, persists and schedules; these
routes only translate HTTP to it.

The history also holds the records of synchronous requests (``/v1/images``, its stream,
the OpenAI-compatible routes), listed beside jobs in the original's shapes. Which surface
made an entry is told where the original's clients do not look: the ``origin`` query
parameter of the listing filters by it, and the detail's ``x-imagebridge-origin`` header
names it (``job``, ``sync``, ``stream``, ``openai``). Cancelling a running synchronous
record stops its generation, as for a job.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.jobs import ImageJob, ImageJobPage, ImageJobUpdate
from imagebridge.jobs import JobManager
from imagebridge.jobs.query import INVALID_QUERY
from imagebridge.server.context import request_context
from imagebridge.server.execution import apply_idempotency_header, idempotency_header
from imagebridge.server.openapi import (
    ERROR_RESPONSES,
    idempotency_parameter,
    json_request_body,
    query_parameter,
)
from imagebridge.server.query import (
    MAX_CURSOR_CHARS,
    MAX_PAGE_LIMIT,
    integer_parameter,
    strict_query,
)
from imagebridge.server.routes import decode_body, json_response, protected_router
from imagebridge.server.routes.images import decode_image_request
from imagebridge.server.scope import KEY_FILTER, reading_owner
from imagebridge.server.state import bridge_state
from imagebridge.storage.records import JobOrigin

router = protected_router(tags=["jobs"])

_QUERY_KEYS = (
    "limit",
    "cursor",
    "status",
    "visibility",
    "favorite",
    "search",
    "include_deleted",
    "origin",
    KEY_FILTER,
)
_UPDATE_DECODE = "request body must be valid job update JSON"
_NO_PREVIEW = "partial preview is not available"
_LIST_PARAMETERS = [
    query_parameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT}),
    query_parameter("cursor", {"type": "string", "maxLength": MAX_CURSOR_CHARS}),
    query_parameter("status", {"enum": [status.value for status in ImageJobStatus]}),
    query_parameter("visibility", {"enum": ["active", "hidden", "all"]}),
    query_parameter("favorite", {"type": "boolean"}),
    query_parameter("search", {"type": "string", "maxLength": 512}),
    query_parameter("include_deleted", {"type": "boolean", "deprecated": True}),
    query_parameter("origin", {"enum": [origin.value for origin in JobOrigin]}),
]
ORIGIN_HEADER = "x-imagebridge-origin"
"""Which surface made a history entry: ``job`` or a synchronous request's surface."""


def manager(request: Request) -> JobManager:
    services = bridge_state(request).jobs
    if services is None:  # the app was not started through its lifespan
        raise BridgeError(
            ErrorCode.OVERLOADED, "durable job manager is not running", retryable=True
        )
    return services.jobs


def _owner(request: Request) -> str:
    return request_context(request).owner


def _flag(raw: str | None, field: str) -> bool | None:
    if raw is None:
        return None
    if raw not in ("true", "false"):
        raise BridgeError.invalid_request(INVALID_QUERY, field=field)
    return raw == "true"


@router.post(
    "/v1/jobs",
    operation_id="createImageJob",
    status_code=202,
    responses={202: {"model": ImageJob, "description": "Accepted job"}, **ERROR_RESPONSES},
    openapi_extra={
        "parameters": [idempotency_parameter],
        "requestBody": json_request_body("ImageRequest"),
    },
)
async def create_job(request: Request) -> Response:
    header = idempotency_header(request)
    image_request = apply_idempotency_header(await decode_image_request(request), header)
    job, _ = await manager(request).submit(_owner(request), image_request, idempotency_key=header)
    return json_response(job, status_code=202)


@router.get(
    "/v1/jobs",
    operation_id="listImageJobs",
    responses={200: {"model": ImageJobPage, "description": "Job history page"}, **ERROR_RESPONSES},
    openapi_extra={"parameters": _LIST_PARAMETERS},
)
async def list_jobs(request: Request) -> Response:
    query = strict_query(request, _QUERY_KEYS, INVALID_QUERY)
    page = await manager(request).list(
        reading_owner(request, query),
        limit=integer_parameter(query.get("limit"), invalid=INVALID_QUERY),
        cursor=query.get("cursor"),
        status=query.get("status"),
        visibility=query.get("visibility"),
        favorite=_flag(query.get("favorite"), "favorite"),
        search=query.get("search"),
        include_deleted=_flag(query.get("include_deleted"), "include_deleted"),
        origin=query.get("origin"),
    )
    return json_response(page)


@router.get(
    "/v1/jobs/{id}",
    operation_id="getImageJob",
    responses={200: {"model": ImageJob, "description": "Job detail"}, **ERROR_RESPONSES},
)
async def get_job(id: str, request: Request) -> Response:
    query = strict_query(request, (KEY_FILTER,), INVALID_QUERY)
    job, origin = await manager(request).detail(reading_owner(request, query), id)
    response = json_response(job)
    response.headers[ORIGIN_HEADER] = origin.value
    return response


@router.delete(
    "/v1/jobs/{id}",
    operation_id="cancelImageJob",
    responses={200: {"model": ImageJob, "description": "Job after the request"}, **ERROR_RESPONSES},
)
async def cancel_job(id: str, request: Request) -> Response:
    strict_query(request, (), INVALID_QUERY)
    return json_response(await manager(request).cancel(_owner(request), id))


@router.patch(
    "/v1/jobs/{id}",
    operation_id="updateImageJobHistory",
    responses={200: {"model": ImageJob, "description": "Updated job"}, **ERROR_RESPONSES},
    openapi_extra={"requestBody": json_request_body("ImageJobUpdate")},
)
async def update_job(id: str, request: Request) -> Response:
    strict_query(request, (), INVALID_QUERY)
    update = await decode_body(ImageJobUpdate, request, _UPDATE_DECODE)
    return json_response(await manager(request).update(_owner(request), id, update))


@router.get(
    "/v1/jobs/{id}/partial",
    operation_id="getImageJobPartialPreview",
    response_class=Response,
    responses={
        200: {
            "description": "Latest verified partial preview",
            "content": {
                media: {"schema": {"type": "string", "format": "binary"}}
                for media in ("image/png", "image/jpeg", "image/webp")
            },
        },
        **ERROR_RESPONSES,
    },
)
async def partial_preview(id: str, request: Request) -> Response:
    query = strict_query(request, (KEY_FILTER,), INVALID_QUERY)
    preview = manager(request).partial(reading_owner(request, query), id)
    if preview is None:
        raise BridgeError.invalid_request(_NO_PREVIEW, resource="job")
    return Response(
        preview.data,
        media_type=preview.media_type,
        headers={
            "cache-control": "private, no-store",
            "x-content-type-options": "nosniff",
            "x-image-output-index": str(preview.output_index),
            "x-image-partial-index": str(preview.partial_index),
        },
    )
