"""``/health/live`` and ``/health/ready``: public, detail-free, never probe on request."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.server.models import LiveStatus, ReadinessStatus
from imagebridge.server.routes import json_response, public_router
from imagebridge.server.state import bridge_state

router = public_router(tags=["health"])


@router.get(
    "/health/live",
    operation_id="getLiveness",
    responses={200: {"model": LiveStatus, "description": "The process is serving"}},
)
async def live() -> Response:
    return json_response(LiveStatus())


@router.get(
    "/health/ready",
    operation_id="getReadiness",
    responses={
        200: {
            "model": ReadinessStatus,
            "description": "Every provider was ready at the last probe",
        },
        503: {"model": ReadinessStatus, "description": "Not ready, not yet probed, or stale"},
    },
)
async def ready(request: Request) -> Response:
    state = bridge_state(request)
    if state.readiness.ready and not state.drain.draining:
        return json_response(ReadinessStatus(status="ready"))
    return json_response(ReadinessStatus(status="not_ready"), status_code=503)
