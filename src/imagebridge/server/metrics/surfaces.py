"""Which surface an HTTP image operation came through, and its count at the end.

The synchronous, streamed and OpenAI-compatible routes share ``server/execution.py``;
the surface is read from the route's path, so a new route is one line in
:data:`SURFACES` (the Responses API's is there already) and the shared code takes no
parameter for it. Jobs report from the job runner (``route="jobs"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from starlette.requests import Request

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.jobs.outcomes import failure_outcome, success_outcome
from imagebridge.server.context import request_context

if TYPE_CHECKING:
    from imagebridge.server.state import BridgeState

__all__ = ["SURFACES", "count_operation", "surface_of"]

SURFACES: Final = {
    "/v1/images": "images",
    "/v1/images/stream": "stream",
    "/v1/images/generations": "openai",
    "/v1/images/edits": "openai",
    "/v1/responses": "responses",
}
"""Route path → the ``route`` label (jobs/outcomes.py ``ROUTES``)."""


def surface_of(request: Request) -> str:
    path: str = request.scope.get("path", "")
    return SURFACES.get(path, "other")


def count_operation(
    state: BridgeState,
    request: Request,
    result: ImageResponse | BridgeError,
    image_request: ImageRequest | None,
    *,
    provider: str,
    seconds: float,
) -> None:
    """Report one finished HTTP image operation to the metrics (when enabled)."""
    metrics = state.metrics
    if metrics is None:
        return
    principal = request_context(request).principal
    record = getattr(principal, "key", None)
    key = record.name if record is not None else None
    route = surface_of(request)
    if isinstance(result, ImageResponse):
        outcome = success_outcome(route, result, key=key, seconds=seconds)
    else:
        outcome = failure_outcome(
            route, result, image_request, provider=provider, key=key, seconds=seconds
        )
    metrics.image_outcome(outcome)
