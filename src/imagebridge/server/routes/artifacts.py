"""Artifacts: verified image bytes and thumbnails of the caller's artifacts.

Bytes are re-verified (SHA-256 and a full decode) on every read. Any failure — malformed
or unknown id, another owner's artifact, tampered bytes — is the same 404, so the route
cannot be used to probe which ids exist. One failure is not "gone": an object store
(``artifacts.backend = "s3"``) that does not answer is a 503 with ``x-should-retry: true``
(``details.reason`` ``store_unavailable``), so a client retries the read. With
``artifacts.s3.serve = "redirect"`` the image is verified the same way and answered with a
307 to a presigned URL of the object (thumbnails are always made and served here).

``DELETE /v1/artifacts/{id}`` is an addition (the original has no way to delete one): it
removes the caller's own artifact — image, metadata sidecar and ownership record, on
either backend — and answers 204; afterwards the artifact, its thumbnail and every link
to it are 404. It acts only in the caller's own scope (the admin's ``?key=`` view is
read-only).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import NoReturn

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.artifacts.rules import NOT_FOUND, THUMBNAIL_EDGE_MESSAGE
from imagebridge.artifacts.s3.store import S3ArtifactStore
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.ids import canonical_uuid
from imagebridge.server.context import request_context
from imagebridge.server.errors import HttpError
from imagebridge.server.openapi import ERROR_RESPONSES, query_parameter
from imagebridge.server.query import integer_parameter, strict_query
from imagebridge.server.routes import protected_router
from imagebridge.server.scope import KEY_FILTER, reading_owner
from imagebridge.server.state import bridge_state

router = protected_router(tags=["artifacts"])

DEFAULT_THUMBNAIL_EDGE = 384
_INVALID_QUERY = "artifact query parameters are invalid"
_CACHE = "private, max-age=31536000, immutable"
REDIRECT_TTL_SECS = 300
"""How long the presigned URL of a redirect is valid: it is followed at once."""
_IMAGE_CONTENT = {
    media: {"schema": {"type": "string", "format": "binary"}}
    for media in ("image/png", "image/jpeg", "image/webp")
}


def _not_found(error: BridgeError) -> HttpError:
    """Every artifact failure answers 404, keeping its own code and message."""
    return HttpError(
        404, error.code, error.message, details=error.details, suggestions=error.suggestions
    )


def read_failed(error: BridgeError) -> NoReturn:
    """A retryable failure (the object store unreachable) is a 503 to retry; any other
    read failure is the 404 every missing, foreign or altered artifact gets."""
    if error.retryable:
        raise HttpError(
            503,
            error.code,
            error.message,
            retryable=True,
            details=error.details,
            suggestions=error.suggestions,
        ) from None
    raise _not_found(error) from None


def _headers(etag: str, filename: str) -> dict[str, str]:
    return {
        "cache-control": _CACHE,
        "etag": f'"{etag}"',
        "content-disposition": f'inline; filename="{filename}"',
        "x-content-type-options": "nosniff",
    }


@router.get(
    "/v1/artifacts/{id}",
    operation_id="getImageArtifact",
    response_class=Response,
    responses={
        200: {"description": "Verified image", "content": _IMAGE_CONTENT},
        **ERROR_RESPONSES,
    },
)
async def get_artifact(id: str, request: Request) -> Response:
    owner = reading_owner(request, strict_query(request, (KEY_FILTER,), _INVALID_QUERY))
    application = bridge_state(request).application
    store = application.artifacts
    if isinstance(store, S3ArtifactStore) and application.config.artifacts.s3.serve == "redirect":
        try:
            location = await store.presigned_url(id, owner, REDIRECT_TTL_SECS)
        except BridgeError as error:
            read_failed(error)
        return Response(
            status_code=307,
            headers={"location": location, "cache-control": "private, no-store"},
        )
    try:
        content = await store.read(id, owner)
    except BridgeError as error:
        read_failed(error)
    return Response(
        content.data,
        media_type=content.info.format.media_type,
        headers=_headers(content.info.sha256, content.basename),
    )


@router.delete(
    "/v1/artifacts/{id}",
    operation_id="deleteImageArtifact",
    status_code=204,
    response_class=Response,
    responses={204: {"description": "Artifact deleted"}, **ERROR_RESPONSES},
)
async def delete_artifact(id: str, request: Request) -> Response:
    strict_query(request, (), _INVALID_QUERY)
    owner = request_context(request).owner
    try:
        await bridge_state(request).application.artifacts.delete(id, owner)
    except BridgeError as error:
        if error.retryable or error.message == NOT_FOUND:
            read_failed(error)
        raise  # a store that refused the removal: its own error (a storage fault, 5xx)
    return Response(status_code=204)


def _edge(raw: str | None) -> int:
    edge = integer_parameter(raw, invalid=THUMBNAIL_EDGE_MESSAGE, field="edge")
    return DEFAULT_THUMBNAIL_EDGE if edge is None else edge


@router.get(
    "/v1/artifacts/{id}/thumbnail",
    operation_id="getImageArtifactThumbnail",
    response_class=Response,
    responses={
        200: {
            "description": "PNG thumbnail",
            "content": {"image/png": {"schema": {"type": "string", "format": "binary"}}},
        },
        **ERROR_RESPONSES,
    },
    openapi_extra={
        "parameters": [
            query_parameter(
                "edge", {"type": "integer", "minimum": 32, "maximum": 2048, "default": 384}
            )
        ]
    },
)
async def get_thumbnail(id: str, request: Request) -> Response:
    query = strict_query(request, ("edge", KEY_FILTER), _INVALID_QUERY)
    edge = _edge(query.get("edge"))
    owner = reading_owner(request, query)
    store = bridge_state(request).application.artifacts
    try:
        data = await store.thumbnail(id, owner, edge)
    except BridgeError as error:
        if error.code is ErrorCode.INVALID_REQUEST:
            raise  # the edge, a caller mistake: 422
        read_failed(error)
    digest = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
    name = f"thumbnail-{canonical_uuid(id)}.png"
    return Response(data, media_type="image/png", headers=_headers(digest, name))
