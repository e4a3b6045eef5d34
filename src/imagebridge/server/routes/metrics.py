"""``GET /metrics``: Prometheus text exposition, bearer-protected, only when enabled.

With named API keys only the admin may read it (403 for a key): the series name every key
and pool account of the team.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.server.context import request_context
from imagebridge.server.metrics import METRICS_CONTENT_TYPE
from imagebridge.server.openapi import ERROR_RESPONSES
from imagebridge.server.routes import protected_router
from imagebridge.server.state import bridge_state

router = protected_router(tags=["operations"])


@router.get(
    "/metrics",
    operation_id="getMetrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text format 0.0.4",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **ERROR_RESPONSES,
    },
)
async def metrics(request: Request) -> Response:
    principal = request_context(request).principal
    if principal is not None and not principal.admin:
        raise BridgeError(ErrorCode.PERMISSION_DENIED, "only the admin key may read metrics")
    collector = bridge_state(request).metrics
    assert collector is not None  # the route is only mounted when metrics are enabled
    return Response(
        collector.render(),
        headers={"content-type": METRICS_CONTENT_TYPE, "cache-control": "no-store"},
    )
