"""``GET /v1/openapi.json``: the public OpenAPI 3.1 document."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.server.errors import json_bytes
from imagebridge.server.openapi import build_openapi
from imagebridge.server.routes import public_router

router = public_router()


@router.get("/v1/openapi.json", include_in_schema=False)
async def openapi_document(request: Request) -> Response:
    return Response(json_bytes(build_openapi(request.app)), media_type="application/json")
