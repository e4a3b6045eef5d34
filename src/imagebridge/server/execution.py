"""Running one image operation for an HTTP caller.

Shared by ``/v1/images``, ``/v1/images/stream`` and the OpenAI-compatible routes: the
``Idempotency-Key`` header rules, the checks the server makes before paying for provider
work (intrinsic validation, registered routes), the caller's ``on_disconnect`` policy, and
the outcome that metrics and the completion log line record.

With a job history (``server.jobs.enabled``), every request leaves a record there and a
retry joins the generation it repeats (:mod:`imagebridge.server.joins`); without one, the
engine's in-memory coordinator replays keyed requests within this process, as the
original did. Either way the run itself is :class:`~imagebridge.server.sync_call.SyncCall`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from starlette.requests import Request

from imagebridge.contract.enums import DisconnectPolicy
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.keep import ProviderDispatch
from imagebridge.engine.provider import EventSink
from imagebridge.engine.registry import is_provider_name
from imagebridge.engine.validation import validate_request
from imagebridge.jobs.sync_records import SyncRecords
from imagebridge.server.context import OperationOutcome, RequestContext, request_context
from imagebridge.server.errors import provider_not_found
from imagebridge.server.joins import answer_with_history
from imagebridge.server.metrics.surfaces import count_operation
from imagebridge.server.presence import ClientPresence
from imagebridge.server.state import BridgeState
from imagebridge.server.sync_call import SyncCall
from imagebridge.storage.records import JobOrigin

__all__ = [
    "MAX_IDEMPOTENCY_HEADER_BYTES",
    "apply_idempotency_header",
    "disconnect_policy",
    "execute_image",
    "idempotency_header",
    "sync_records",
]

logger = logging.getLogger("imagebridge.server")
MAX_IDEMPOTENCY_HEADER_BYTES = 512
_HEADER = "idempotency-key"


def idempotency_header(request: Request) -> str | None:
    """The ``Idempotency-Key`` header: one value of 1–512 visible ASCII bytes, or 422."""
    values = request.headers.getlist(_HEADER)
    if not values:
        return None
    value = values[0]
    if (
        len(values) != 1
        or not 1 <= len(value) <= MAX_IDEMPOTENCY_HEADER_BYTES
        or any(not "!" <= char <= "~" for char in value)
    ):
        raise BridgeError.invalid_request(
            "Idempotency-Key header must be 1 to 512 visible ASCII characters",
            field="idempotency_key",
        )
    return value


def apply_idempotency_header(image_request: ImageRequest, header: str | None) -> ImageRequest:
    """Copy the header into the request; a different body key is a conflict (422)."""
    if header is None:
        return image_request
    body_key = image_request.idempotency_key
    if body_key is not None and body_key != header:
        raise BridgeError.invalid_request(
            "Idempotency-Key conflicts with the request body", field="idempotency_key"
        )
    return image_request.model_copy(update={"idempotency_key": header})


def _check_routes(state: BridgeState, image_request: ImageRequest) -> None:
    registered = set(state.runtime.registry.names)
    routing = image_request.routing
    candidates = [("routing.provider", routing.provider)]
    candidates.extend(
        (f"routing.fallbacks[{index}].provider", route.provider)
        for index, route in enumerate(routing.fallbacks)
    )
    for field, name in candidates:
        if name is not None and name not in registered:
            raise provider_not_found(name if is_provider_name(name) else None, field=field)


def _provider_label(state: BridgeState, image_request: ImageRequest | None) -> str:
    name = image_request.routing.provider if image_request is not None else None
    if name is None:
        return state.runtime.registry.default
    return name if name in state.runtime.registry.names else "unresolved"


def disconnect_policy(state: BridgeState, image_request: ImageRequest) -> DisconnectPolicy:
    """The request's ``policies.on_disconnect``, else ``server.sync.on_disconnect``."""
    chosen = image_request.policies.on_disconnect
    return chosen if chosen is not None else state.config.server.sync.on_disconnect


def sync_records(state: BridgeState) -> SyncRecords | None:
    """The history synchronous requests are recorded in (``None``: jobs are disabled)."""
    services = state.jobs
    return services.jobs.sync_records if services is not None else None


async def execute_image(
    state: BridgeState,
    request: Request,
    build: Callable[[], ImageRequest],
    *,
    origin: JobOrigin = JobOrigin.SYNC,
    events: EventSink | None = None,
    presence: ClientPresence | None = None,
    watch_client: bool = True,
) -> ImageResponse:
    """Build, check and execute one request as the caller; record its outcome.

    ``build`` runs inside the recorded operation, so header and validation failures are
    counted like any other failed operation. ``origin`` names the surface in the history.
    The caller's departure follows its ``on_disconnect`` policy (``presence``; an SSE
    route watches the client itself and passes ``watch_client=False``).
    """
    context = request_context(request)
    started = time.monotonic()
    presence = presence or ClientPresence()
    image_request: ImageRequest | None = None
    call: SyncCall | None = None
    try:
        image_request = build()
        validate_request(image_request, state.runtime.settings.request_limits)
        _check_routes(state, image_request)
        dispatch = ProviderDispatch()
        presence.arm(disconnect_policy(state, image_request), dispatch)
        call = SyncCall(
            state,
            request,
            context,
            image_request,
            origin=origin,
            presence=presence,
            dispatch=dispatch,
            events=events,
            watch_client=watch_client,
        )
        records = sync_records(state)
        if records is None:
            response = await call.run()
        else:
            response = await answer_with_history(call, records)
    except BridgeError as error:
        provider = error.provider or _provider_label(state, image_request)
        _record_failure(state, context, error, started, provider)
        count_operation(
            state, request, error, image_request, provider=provider, seconds=_since(started)
        )
        raise
    if call.replayed:
        _record_replay(context, response, started)
    else:
        _record_success(state, context, response)
        count_operation(
            state,
            request,
            response,
            image_request,
            provider=response.provider,
            seconds=_since(started),
        )
    return response


def _since(started: float) -> float:
    return max(0.0, time.monotonic() - started)


def _record_replay(context: RequestContext, response: ImageResponse, started: float) -> None:
    """A joined retry's answer: the log line names it; the images were counted once, when
    they were made, so the image metrics count nothing more."""
    context.outcome = OperationOutcome(
        provider=response.provider, total_ms=int(_since(started) * 1000)
    )


def _record_failure(
    state: BridgeState,
    context: RequestContext,
    error: BridgeError,
    started: float,
    provider: str,
) -> None:
    total_ms = max(0, int((time.monotonic() - started) * 1000))
    context.outcome = OperationOutcome(provider=provider, code=error.code.value, total_ms=total_ms)
    if state.metrics is not None:
        state.metrics.record(provider=provider, code=error.code.value, total_ms=total_ms)


def _record_success(state: BridgeState, context: RequestContext, response: ImageResponse) -> None:
    timings = response.timings
    context.outcome = OperationOutcome(
        provider=response.provider,
        total_ms=timings.total_ms,
        provider_ms=timings.provider_ms,
        queue_ms=timings.queue_ms,
    )
    if state.metrics is not None:
        state.metrics.record(
            provider=response.provider,
            code=None,
            total_ms=timings.total_ms,
            provider_ms=timings.provider_ms,
            queue_ms=timings.queue_ms,
            generated_bytes=sum(item.bytes for item in response.data),
            normalizations=len(response.normalizations),
        )
