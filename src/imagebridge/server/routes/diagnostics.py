"""``GET /v1/diagnostics`` (the original's document) and ``GET /v1/diagnostics/extended``
(it plus imagebridge's additions): redacted operator state, bearer-protected."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.server.diagnostics import build_diagnostics, build_extended_diagnostics
from imagebridge.server.models import ExtendedDiagnostics, OperatorDiagnostics
from imagebridge.server.openapi import ERROR_RESPONSES
from imagebridge.server.query import strict_query
from imagebridge.server.routes import json_response, protected_router
from imagebridge.server.state import bridge_state

router = protected_router(tags=["operations"])


@router.get(
    "/v1/diagnostics",
    operation_id="getOperatorDiagnostics",
    responses={
        200: {"model": OperatorDiagnostics, "description": "Redacted operator state"},
        **ERROR_RESPONSES,
    },
)
async def diagnostics(request: Request) -> Response:
    strict_query(request, (), "diagnostics takes no query parameters")
    return json_response(await build_diagnostics(bridge_state(request)))


@router.get(
    "/v1/diagnostics/extended",
    operation_id="getExtendedDiagnostics",
    responses={
        200: {
            "model": ExtendedDiagnostics,
            "description": "Redacted operator state with imagebridge's additions",
        },
        **ERROR_RESPONSES,
    },
)
async def extended_diagnostics(request: Request) -> Response:
    strict_query(request, (), "diagnostics takes no query parameters")
    return json_response(await build_extended_diagnostics(bridge_state(request)))
