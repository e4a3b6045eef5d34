"""``GET /metrics``: Prometheus text exposition, only when enabled; the admin's only.

With named API keys a key gets 403: the series name every key and pool account of the
team (docs/keys.md, "Operator views"). Gauges read from the stores are refreshed first,
bounded in time and frequency (``server/metrics/gauges.py``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.server.metrics import METRICS_CONTENT_TYPE
from imagebridge.server.openapi import ERROR_RESPONSES
from imagebridge.server.routes import admin_router
from imagebridge.server.state import bridge_state

router = admin_router(tags=["operations"])


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
    state = bridge_state(request)
    collector = state.metrics
    assert collector is not None  # the route is only mounted when metrics are enabled
    jobs = state.jobs.jobs if state.jobs is not None else None
    body = await collector.scrape(keys=state.access.keys, jobs=jobs)
    return Response(
        body, headers={"content-type": METRICS_CONTENT_TYPE, "cache-control": "no-store"}
    )
