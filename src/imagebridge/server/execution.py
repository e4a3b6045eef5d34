"""Running one image operation for an HTTP caller.

Shared by ``/v1/images``, ``/v1/images/stream`` and the OpenAI-compatible routes: the
``Idempotency-Key`` header rules, the checks the server makes before paying for provider
work (intrinsic validation, registered routes), the base address ``url`` outputs link to, the
caller's ownership scope, cancellation when the client goes away, and the outcome that
metrics and the completion log line record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.types import Receive

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.provider import EventSink
from imagebridge.engine.registry import is_provider_name
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.engine.validation import validate_request
from imagebridge.keys import KeyService, scope_request_session, unscope_response_session
from imagebridge.server.auth import quota_headers
from imagebridge.server.context import OperationOutcome, RequestContext, request_context
from imagebridge.server.errors import provider_not_found
from imagebridge.server.metrics.surfaces import count_operation
from imagebridge.server.state import BridgeState
from imagebridge.storage.records import KeyRecord

__all__ = [
    "MAX_IDEMPOTENCY_HEADER_BYTES",
    "apply_idempotency_header",
    "execute_image",
    "idempotency_header",
    "watch_disconnect",
]

T = TypeVar("T")
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


async def watch_disconnect(receive: Receive, token: CancelToken) -> None:
    """Cancel ``token`` when the client disconnects (call after the body has been read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            token.cancel("client disconnected")
            return


async def _until_disconnect(request: Request, token: CancelToken, work: Awaitable[T]) -> T:
    watcher = asyncio.create_task(watch_disconnect(request.receive, token))
    try:
        return await work
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher


def _provider_label(state: BridgeState, image_request: ImageRequest | None) -> str:
    name = image_request.routing.provider if image_request is not None else None
    if name is None:
        return state.runtime.registry.default
    return name if name in state.runtime.registry.names else "unresolved"


async def execute_image(
    state: BridgeState,
    request: Request,
    build: Callable[[], ImageRequest],
    *,
    events: EventSink | None = None,
    token: CancelToken | None = None,
    watch_client: bool = True,
) -> ImageResponse:
    """Build, check and execute one request as the caller; record its outcome.

    ``build`` runs inside the recorded operation, so header and validation failures are
    counted like any other failed operation. The caller's disconnect cancels the work
    (the SSE route watches the client itself and passes ``watch_client=False``).
    """
    context = request_context(request)
    started = time.monotonic()
    token = token or CancelToken()
    image_request: ImageRequest | None = None
    try:
        image_request = build()
        validate_request(image_request, state.runtime.settings.request_limits)
        _check_routes(state, image_request)
        execution = ExecutionContext(
            request_id=context.request_id,
            idempotency_scope=context.owner,
            owner=context.owner,
            cancellation=token,
            events=events,
            link_base=str(request.base_url),
        )
        checked = image_request
        principal = context.principal
        key = principal.key if principal is not None else None
        if key is not None:  # a key's sessions live in its own namespace
            checked = scope_request_session(image_request, key.id)

        async def run() -> ImageResponse:
            work = state.runtime.execute(checked, execution)
            if watch_client:
                return await _until_disconnect(request, token, work)
            return await work

        if key is not None and state.access.keys is not None:
            response = await _run_on_key(state, state.access.keys, key, context, checked, run)
            response = unscope_response_session(response, key.id)
        else:
            response = await run()
    except BridgeError as error:
        provider = error.provider or _provider_label(state, image_request)
        _record_failure(state, context, error, started, provider)
        count_operation(
            state, request, error, image_request, provider=provider, seconds=_since(started)
        )
        raise
    _record_success(state, context, response)
    count_operation(
        state, request, response, image_request, provider=response.provider, seconds=_since(started)
    )
    return response


def _since(started: float) -> float:
    return max(0.0, time.monotonic() - started)


async def _run_on_key(
    state: BridgeState,
    keys: KeyService,
    key: KeyRecord,
    context: RequestContext,
    image_request: ImageRequest,
    run: Callable[[], Awaitable[ImageResponse]],
) -> ImageResponse:
    """Run on an API key's quota (docs/keys.md): one charge, whose slot is waited for within
    the request's deadline; every answer carries the key's counters as last read."""
    settings = state.runtime.settings
    charge = keys.charge(
        key,
        image_request,
        default_provider=state.runtime.registry.default,
        slot_wait_s=(image_request.timeout_ms or settings.default_timeout_ms) / 1000,
    )
    try:
        async with charge:
            _show_counters(keys, context, charge.counters)  # a stream's headers go out now
            response = await run()
            charge.record(response)
    finally:
        _show_counters(keys, context, charge.counters)
    return response


def _show_counters(keys: KeyService, context: RequestContext, record: KeyRecord | None) -> None:
    if record is not None:
        context.extra_headers = quota_headers(keys, record)


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
