"""``GET /v1/artifact-links/{id}/{filename}``: the signed link a ``url`` output is.

Public on purpose: the signature is the permission, so any HTTP client (a browser, an
``<img>`` tag, a chat front end's downloader) can fetch it without the bridge's bearer.
A link that is malformed, altered or expired is a 403 ``permission_denied`` (with
``details.reason`` ``invalid_link`` or ``expired_link``) decided before any file is
touched; a genuine link whose artifact is gone is the artifacts route's 404.
"""

from __future__ import annotations

import asyncio
import math
import time

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.artifacts.filesystem.links import INVALID_LINK
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.server.errors import HttpError
from imagebridge.server.openapi import ERROR_RESPONSES, query_parameter
from imagebridge.server.routes import public_router
from imagebridge.server.routes.artifacts import read_failed
from imagebridge.server.state import bridge_state

router = public_router(tags=["artifacts"])

_QUERY = ("expires", "signature")
_IMAGE_CONTENT = {
    media: {"schema": {"type": "string", "format": "binary"}}
    for media in ("image/png", "image/jpeg", "image/webp")
}


def _query(request: Request) -> tuple[str, str]:
    """``expires`` and ``signature``, each exactly once, and nothing else (else 403)."""
    values: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key not in _QUERY or key in values:
            raise BridgeError(
                ErrorCode.PERMISSION_DENIED, INVALID_LINK, details={"reason": "invalid_link"}
            )
        values[key] = value
    return values.get("expires", ""), values.get("signature", "")


@router.get(
    "/v1/artifact-links/{id}/{filename}",
    operation_id="getSignedArtifact",
    response_class=Response,
    responses={
        200: {"description": "Verified image", "content": _IMAGE_CONTENT},
        **ERROR_RESPONSES,
    },
    openapi_extra={
        "security": [],
        "parameters": [
            query_parameter("expires", {"type": "integer", "minimum": 0}),
            query_parameter("signature", {"type": "string", "pattern": "^[A-Za-z0-9_-]{43}$"}),
        ],
    },
)
async def get_signed_artifact(id: str, filename: str, request: Request) -> Response:
    expires, signature = _query(request)
    state = bridge_state(request)
    links = state.application.links
    canonical = await asyncio.to_thread(links.verify, id, filename, expires, signature)
    try:
        content = await state.application.artifacts.read(canonical, None)
    except BridgeError as error:
        if error.retryable:
            read_failed(error)  # the object store did not answer: 503, retry
        raise HttpError(404, error.code, error.message, details=error.details) from None
    remaining = max(0, math.floor(int(expires) - time.time()))
    return Response(
        content.data,
        media_type=content.info.format.media_type,
        headers={
            "cache-control": f"private, max-age={remaining}",
            "etag": f'"{content.info.sha256}"',
            "content-disposition": f'inline; filename="{content.basename}"',
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
        },
    )
