"""``POST /v1/responses``: OpenAI's Responses API with the ``image_generation`` tool.

The body is decided field by field and mapped onto a native ``ImageRequest``
(:mod:`imagebridge.contract.openai.responses`), run like every other image request
(:func:`~imagebridge.server.execution.execute_image`: keys and quotas, idempotency, the
caller's disconnect, metrics under ``route="responses"``), and answered as OpenAI's
``Response`` (:mod:`imagebridge.contract.openai.responses_output`) or, with
``stream: true``, as its event stream (:mod:`imagebridge.server.openai.responses_stream`).
Every error names the Responses field it concerns in ``param`` (``tools[0].size``,
``input[1].content[0].image_url``), whichever layer found it.

With ``store`` (the default) the response is kept: a row naming the history record its
work wrote (:mod:`imagebridge.server.openai.responses_kept`), read back by
``GET /v1/responses/{id}`` (:mod:`imagebridge.server.openai.responses_routes`).
``background: true`` answers ``queued`` at once and runs the work as a durable job owned by
the caller (:func:`create_background`). ``previous_response_id`` and ``item_reference``
items name a kept response's image, which the follow-up edits; on a provider that keeps
threads a kept response also runs in a persistent session, its conversation, which a
``previous_response_id`` follow-up continues
(:mod:`imagebridge.server.openai.responses_sessions`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.openai.fields import validation_refusal
from imagebridge.contract.openai.responses import (
    ResponsesCreateRequest,
    ResponsesTranslation,
    translate_request,
)
from imagebridge.contract.openai.responses_output import (
    ResponseIds,
    ResponseObject,
    ResponseShape,
    failed_response,
    finished_response,
    pending_response,
    response_shape,
)
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse, Normalization
from imagebridge.imaging.ids import uuid7
from imagebridge.server.context import request_context
from imagebridge.server.execution import (
    apply_idempotency_header,
    execute_image,
    idempotency_header,
)
from imagebridge.server.openai.errors import openai_error
from imagebridge.server.openai.model_names import ModelRoute
from imagebridge.server.openai.responses_kept import (
    find_kept,
    gather_kept,
    ids_of,
    record_of,
    resolve_history,
    save_kept,
    services,
)
from imagebridge.server.openai.responses_models import route_response
from imagebridge.server.openai.responses_sessions import (
    in_conversation,
    keeps_threads,
    new_conversation,
)
from imagebridge.server.openai.responses_stream import (
    RESPONSES_SSE_EVENT_SCHEMA,
    resume_stream,
    stream_response,
)
from imagebridge.server.openapi import ERROR_RESPONSES, idempotency_parameter, json_request_body
from imagebridge.server.routes import (
    OFFLOAD_BYTES,
    json_response,
    large_json_response,
    protected_router,
)
from imagebridge.server.state import BridgeState, bridge_state
from imagebridge.storage.records import JobOrigin

__all__ = ["ResponseRun", "responses_error", "router"]

logger = logging.getLogger("imagebridge.server")
router = protected_router(tags=["openai-compatible"])
NO_HISTORY = "background responses run as durable jobs, and this bridge has no job history"

_DECODE = "request body must be a valid Responses request (JSON)"


def responses_error(error: BridgeError, translation: ResponsesTranslation) -> BridgeError:
    """The error with ``param`` (``details.field``) naming the Responses request's field."""
    return openai_error(error, translation.param)


def _new_ids() -> ResponseIds:
    return ResponseIds(
        response=f"resp_{uuid7().hex}",
        call=f"ig_{uuid7().hex}",
        message=f"msg_{uuid7().hex}",
        created_at=int(time.time()),
    )


@dataclass(slots=True)
class ResponseRun:
    """One response being made: its translation and ids, the routed native request, and
    the answers (finished or failed) in OpenAI's shape."""

    state: BridgeState
    request: Request
    translation: ResponsesTranslation
    ids: ResponseIds
    routed: ImageRequest | None = None
    normalization: Normalization | None = None
    shape: ResponseShape = field(init=False)
    extra: list[Normalization] = field(default_factory=list)
    """Normalizations the stream adds (``partial_images`` clamped), reported first."""
    continues: str | None = None
    """The conversation ``previous_response_id`` names (its persistent session key)."""
    conversation: str | None = None
    """The persistent session this response runs in (set by :meth:`prepare`)."""
    planned: ModelRoute | None = None
    """The route :meth:`prepare` chose, run by :meth:`__call__`."""

    def __post_init__(self) -> None:
        self.shape = response_shape(self.translation)

    @property
    def keeps(self) -> bool:
        """``store`` (default true) and a history to keep it in."""
        return self.translation.body.store is not False and services(self.state) is not None

    def served_shape(self) -> ResponseShape:
        """The shape as kept: the routing's and the stream's normalizations first, and
        what served it when the client named no ``model``."""
        route = [self.normalization] if self.normalization is not None else []
        shape = self.shape.with_normalizations([*self.extra, *route])
        return replace(shape, served_model=self.model, conversation=self.conversation)

    async def keep(self, *, adopt: bool = True) -> None:
        """Keep the response (``store``) as a view of the record its work wrote, once it
        has one; a joined retry's response takes the ids the first one was kept under
        (``adopt``; a stream has sent its ids already)."""
        job_id = record_of(self.request)
        if not self.keeps or job_id is None:
            return
        owner = request_context(self.request).owner
        try:
            kept = await save_kept(self.state, owner, job_id, self.ids, self.served_shape())
        except BridgeError as error:  # the answer stands; it is only not retrievable
            logger.warning(
                "a response could not be kept", extra={"code": error.code.value, "job_id": job_id}
            )
            return
        if adopt and kept is not None and kept.id != self.ids.response:
            self.ids = ids_of(kept)

    def _route(self) -> ModelRoute:
        keyed = apply_idempotency_header(self.translation.request, idempotency_header(self.request))
        return route_response(
            self.translation, keyed, self.state.config, self.state.runtime.registry
        )

    async def prepare(self) -> None:
        """Route the request now and, when it is kept and its one provider keeps threads,
        run it in its conversation: the one ``previous_response_id`` names, else a new one
        (:mod:`~imagebridge.server.openai.responses_sessions`). A routing refusal is left
        to :meth:`__call__`, so the run reports and records it like any other."""
        try:
            route = self._route()
        except BridgeError:
            return
        runtime = self.state.runtime
        if self.keeps and await keeps_threads(runtime, route.request):
            key = self.continues or new_conversation(
                self.ids.response, route.request.idempotency_key
            )
            route = ModelRoute(in_conversation(route.request, key), route.normalization)
            self.conversation = key
        self.planned = route

    def __call__(self) -> ImageRequest:
        """Build the native request (idempotency header, model routing, the conversation
        :meth:`prepare` chose) for execution."""
        route = self.planned or self._route()
        self.routed, self.normalization = route.request, route.normalization
        return route.request

    @property
    def model(self) -> str:
        """The ``model`` the answer repeats: the client's, else what serves it."""
        if self.translation.body.model is not None:
            return self.translation.body.model
        routing = (self.routed or self.translation.request).routing
        registry = self.state.runtime.registry
        if routing.model is not None:
            return routing.model
        provider = routing.provider or registry.default
        models = registry.resolve(provider).descriptor.models if provider in registry.names else []
        return models[0] if models else provider

    def finished(self, response: ImageResponse) -> ResponseObject:
        route = [self.normalization] if self.normalization is not None else []
        return finished_response(
            self.shape,
            self.ids,
            response,
            completed_at=int(time.time()),
            route=[*self.extra, *route],
        )

    def failed(self, error: BridgeError) -> ResponseObject:
        return failed_response(
            self.shape,
            self.ids,
            error,
            model=self.model,
            param=error.field,
            completed_at=int(time.time()),
        )


def _decode(body: bytes) -> ResponsesCreateRequest:
    try:
        return ResponsesCreateRequest.model_validate_json(body)
    except ValidationError as exc:
        raise validation_refusal(exc, _DECODE) from None
    except (ValueError, TypeError, RecursionError):
        raise BridgeError.invalid_request(_DECODE) from None


@router.post(
    "/v1/responses",
    operation_id="createResponse",
    responses={
        200: {
            "description": (
                "OpenAI's `Response` with an `image_generation_call` item and an assistant "
                "message (with `stream: true`, OpenAI's Responses events)"
            ),
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": RESPONSES_SSE_EVENT_SCHEMA},
            },
        },
        **ERROR_RESPONSES,
    },
    openapi_extra={
        "parameters": [idempotency_parameter],
        "requestBody": json_request_body("ResponsesCreateRequest"),
    },
)
async def create_response(request: Request) -> Response:
    raw = await request.body()
    if len(raw) > OFFLOAD_BYTES:
        body = await asyncio.to_thread(_decode, raw)
    else:
        body = _decode(raw)
    state = bridge_state(request)
    owner = request_context(request).owner
    history = await resolve_history(state, owner, body)
    translation = translate_request(body, previous=history.previous, references=history.references)
    run = ResponseRun(state, request, translation, _new_ids(), continues=history.conversation)
    await run.prepare()
    if body.background:
        return await create_background(run)
    if body.stream:
        return stream_response(run)
    try:
        response = await execute_image(state, request, run, origin=JobOrigin.OPENAI)
    except BridgeError as error:
        await run.keep()
        raise responses_error(error, translation) from None
    await run.keep()
    return await large_json_response(run.finished(response))


async def create_background(run: ResponseRun) -> Response:
    """``background: true``: keep the response, then queue its work as a durable job owned
    by the caller (its quota is charged when the job runs, as for every job) and answer
    ``queued`` at once; with ``stream: true`` the answer is the response's event stream,
    as ``GET /v1/responses/{id}?stream=true`` follows it.

    The response's row is written first, naming the job about to be created, so the job's
    end (and its ``response.*`` webhook, written in the same transaction) always finds it.
    A keyed create that repeats an earlier one answers the earlier response.
    """
    state, request, translation = run.state, run.request, run.translation
    jobs = services(state)
    if jobs is None:
        raise BridgeError.unsupported(NO_HISTORY, field="background")
    owner = request_context(request).owner
    header = idempotency_header(request)
    try:
        routed = run()
    except BridgeError as error:
        raise responses_error(error, translation) from None
    job_id = str(uuid7())
    kept = await save_kept(state, owner, job_id, run.ids, run.served_shape(), background=True)
    assert kept is not None
    try:
        job, created = await jobs.jobs.submit(owner, routed, idempotency_key=header, job_id=job_id)
    except BaseException as error:
        await jobs.responses.forget(kept.id)
        if isinstance(error, BridgeError):
            raise responses_error(error, translation) from None
        raise
    if not created:  # a keyed retry: the response the first create kept
        await jobs.responses.forget(kept.id)
        earlier = await jobs.responses.by_job(job.id)
        if earlier is None:
            raise BridgeError.invalid_request(
                "Idempotency-Key names a job that is not a response", field="idempotency_key"
            )
        run.ids = ids_of(earlier)
    if translation.body.stream:
        found = await find_kept(state, owner, run.ids.response)
        return resume_stream(state, found, starting_after=None)
    if not created:
        return await large_json_response(await gather_kept(state, owner, run.ids.response))
    answer = pending_response(run.served_shape(), run.ids, model=run.model, status="queued")
    return json_response(answer)
