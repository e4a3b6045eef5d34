"""``GET /v1/diagnostics`` (the original's document) and ``GET /v1/diagnostics/extended``
(it plus imagebridge's additions): redacted operator state.

The extended document is the operator's: with named keys only the admin reads it (it
names pool accounts, instances and everyone's work). A key reading ``/v1/diagnostics``
gets the same shape with only what concerns it (docs/keys.md, "Operator views").
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from imagebridge.server.context import request_context
from imagebridge.server.diagnostics import build_diagnostics, build_extended_diagnostics
from imagebridge.server.models import ExtendedDiagnostics, OperatorDiagnostics
from imagebridge.server.openapi import ERROR_RESPONSES
from imagebridge.server.query import strict_query
from imagebridge.server.routes import admin_router, json_response, protected_router
from imagebridge.server.state import bridge_state

_everyone = protected_router(tags=["operations"])
_operator = admin_router(tags=["operations"])


@_everyone.get(
    "/v1/diagnostics",
    operation_id="getOperatorDiagnostics",
    responses={
        200: {"model": OperatorDiagnostics, "description": "Redacted operator state"},
        **ERROR_RESPONSES,
    },
)
async def diagnostics(request: Request) -> Response:
    strict_query(request, (), "diagnostics takes no query parameters")
    principal = request_context(request).principal
    key_owner = None if principal is None or principal.admin else principal.owner
    return json_response(await build_diagnostics(bridge_state(request), key_owner=key_owner))


@_operator.get(
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


router = APIRouter()
router.include_router(_everyone)
router.include_router(_operator)
