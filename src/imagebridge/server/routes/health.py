"""``/health/live`` and ``/health/ready``: public, detail-free, never probe on request.

Their bodies are the original's (``{"status": ...}``, decoded strictly by its clients). A
storage fault (a full disk, an I/O error) does not make the bridge unready, since it still
serves reads; both answers then carry ``x-imagebridge-storage: degraded; <area>=<reason>``
(``/v1/diagnostics/extended`` has the details under ``storage``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.engine.storage_faults import STORAGE_HEALTH
from imagebridge.server.models import LiveStatus, ReadinessStatus
from imagebridge.server.routes import json_response, public_router
from imagebridge.server.state import bridge_state

router = public_router(tags=["health"])

STORAGE_HEADER = "x-imagebridge-storage"
READINESS_RETRY_AFTER_SECS = 1


def _with_storage(response: Response) -> Response:
    reasons = STORAGE_HEALTH.reasons()
    if reasons:
        areas = ", ".join(f"{area}={reason}" for area, reason in reasons.items())
        response.headers[STORAGE_HEADER] = f"degraded; {areas}"
    return response


@router.get(
    "/health/live",
    operation_id="getLiveness",
    responses={200: {"model": LiveStatus, "description": "The process is serving"}},
)
async def live() -> Response:
    return _with_storage(json_response(LiveStatus()))


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
    store_reachable = state.jobs is None or state.jobs.jobs.store_reachable
    if state.readiness.ready and not state.drain.draining and store_reachable:
        return _with_storage(json_response(ReadinessStatus(status="ready")))
    not_ready = json_response(ReadinessStatus(status="not_ready"), status_code=503)
    # a probe is safe to repeat: say so, as every other 503 of the bridge does
    not_ready.headers["x-should-retry"] = "true"
    not_ready.headers["retry-after"] = str(READINESS_RETRY_AFTER_SECS)
    return _with_storage(not_ready)
