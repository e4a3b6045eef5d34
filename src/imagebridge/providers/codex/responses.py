"""The ``codex-responses`` provider: the hosted image tool over the Codex Responses backend.

One output per call (the application wraps it in the fan-out decorator for ``n > 1``):
bound the engine's loaded inputs, build the Responses body, POST it with the user's
ChatGPT login, fold the SSE stream while forwarding partial images, verify
the final image and report it with its revised prompt and usage (always an object,
even when upstream sends none). Failures: docs/providers.md; the one
transient retry follows :mod:`.retries`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Final

import httpx

from imagebridge._version import __version__
from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.enums import ProviderAttemptOutcome
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.events import PartialImageEvent, ProgressEvent
from imagebridge.contract.request import ImageRequest, parse_aspect_ratio
from imagebridge.contract.response import ImageResponse, ProviderAttempt
from imagebridge.engine.provider import ProviderContext
from imagebridge.providers.codex.answer import image_response, verified_image
from imagebridge.providers.codex.auth import (
    CodexCredentials,
    CredentialsLoader,
    load_codex_credentials_async,
)
from imagebridge.providers.codex.base import CodexHttpProvider, CodexOptions
from imagebridge.providers.codex.capabilities import responses_capabilities, responses_sizes
from imagebridge.providers.codex.carriers import CarrierMemory, login_key
from imagebridge.providers.codex.guarded_call import CallResult, CallState
from imagebridge.providers.codex.hints import size_for_hints, with_aspect_line
from imagebridge.providers.codex.inputs import CodexInputs
from imagebridge.providers.codex.pool import AccountPool
from imagebridge.providers.codex.wire import (
    DEFAULT_IMAGE_MODEL,
    DEFAULT_RESPONSES_ENDPOINT,
    DEFAULT_RESPONSES_MODEL,
    DEFAULT_RESPONSES_MODEL_FALLBACKS,
    SUPPORTED_IMAGE_MODELS,
    ResponsesResult,
    ResponsesStreamState,
    build_responses_body,
    build_responses_headers,
    check_backend_url,
    check_image_model,
    derive_usage_url,
    encode_json_body,
    is_plan_model_refusal,
)
from imagebridge.providers.sse import SseDecoder, SseEvent, SseLimits

__all__ = [
    "CODEX_RESPONSES_PROVIDER",
    "CodexResponsesOptions",
    "CodexResponsesProvider",
    "responses_request_body",
]

CODEX_RESPONSES_PROVIDER = "codex-responses"
CARRIER_FALLBACK_WARNING: Final = "responses_model_fallback_used"
CARRIER_SUGGESTION: Final = (
    "Set providers.codex_responses.responses_model (or responses_model_fallbacks) to a "
    "model your ChatGPT plan includes."
)


@dataclass(frozen=True, slots=True)
class CodexResponsesOptions(CodexOptions):
    """``[providers.codex_responses]`` as plain values."""

    endpoint: str = DEFAULT_RESPONSES_ENDPOINT
    responses_model: str = DEFAULT_RESPONSES_MODEL
    responses_model_fallbacks: tuple[str, ...] = DEFAULT_RESPONSES_MODEL_FALLBACKS
    """Carriers tried in order after ``responses_model`` when the plan refuses it."""
    image_model: str = DEFAULT_IMAGE_MODEL
    sse_limits: SseLimits = field(default_factory=SseLimits)


def responses_request_body(
    request: ImageRequest, inputs: CodexInputs, *, image_model: str, responses_model: str
) -> dict[str, object]:
    """The Responses body for one output of ``request`` (already negotiated).

    Emulated hints: an ``aspect_ratio`` adds one sentence to the prompt, and an ``auto``
    size with an aspect ratio or resolution becomes the nearest size the tool accepts.
    """
    params = request.parameters
    size = params.size
    if size == "auto":
        size = (
            size_for_hints(params.aspect_ratio, params.resolution, responses_sizes(image_model))
            or size
        )
    ratio = parse_aspect_ratio(params.aspect_ratio) if params.aspect_ratio is not None else None
    return build_responses_body(
        with_aspect_line(request.prompt, ratio),
        operation=request.operation.value,
        sources=inputs.sources,
        references=inputs.references,
        image_model=image_model,
        responses_model=responses_model,
        size=size,
        quality=params.quality.value,
        output_format=params.output_format.value,
        background=params.background.value,
        moderation=params.moderation.value,
        output_compression=params.output_compression,
        partial_images=params.partial_images,
        input_fidelity=None if params.input_fidelity is None else params.input_fidelity.value,
        action=params.action.value,
    )


class CodexResponsesProvider(CodexHttpProvider):
    """Image generation through ``POST …/backend-api/codex/responses`` (SSE)."""

    def __init__(
        self,
        options: CodexResponsesOptions | None = None,
        *,
        credentials_loader: CredentialsLoader = load_codex_credentials_async,
        pool: AccountPool | None = None,
    ) -> None:
        options = options or CodexResponsesOptions()
        check_backend_url(options.endpoint, field="endpoint")
        check_image_model(options.image_model)
        options = replace(
            options,
            name=options.name or CODEX_RESPONSES_PROVIDER,
            usage_endpoint=options.usage_endpoint or derive_usage_url(options.endpoint),
        )
        super().__init__(options, credentials_loader=credentials_loader, pool=pool)
        self.options = options
        self.carriers = CarrierMemory((options.responses_model, *options.responses_model_fallbacks))

    @property
    def descriptor(self) -> ProviderDescriptor:
        return ProviderDescriptor(
            name=self.options.name,
            display_name="Codex OAuth Responses",
            version=__version__,
            experimental=False,
            models=list(SUPPORTED_IMAGE_MODELS),
        )

    async def capabilities(self, model: str | None) -> ProviderCapabilities:
        chosen = model or self.options.image_model
        try:
            check_image_model(chosen)
        except BridgeError as error:
            raise error.with_provider(self.name) from None
        return responses_capabilities(self.name, chosen, self.options.input_bounds)

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        started = time.monotonic()
        model, inputs = await self._prepare(request, context, self.options.image_model)
        bodies: dict[str, bytes] = {}
        refused: list[ProviderAttempt] = []
        refused_by_login: dict[str, set[str]] = {}

        async def attempt(credentials: CodexCredentials, state: CallState) -> CallResult:
            return await self._through_carriers(
                request, inputs, model, bodies, refused, refused_by_login, credentials, state,
                context,
            )  # fmt: skip

        try:
            served = await self._call(request, context, inputs, attempt)
        except BridgeError as error:
            if refused:  # every refused carrier is one upstream call, already counted
                error.details["carrier_models_refused"] = [a.model for a in refused]
            raise
        response = image_response(
            request, context, provider=self.name, model=model, served=served, started=started
        )
        if refused:
            response.attempts[0:0] = refused
            response.add_warning(CARRIER_FALLBACK_WARNING)
        return response

    async def diagnostics(self) -> dict[str, Any]:
        """The quota windows, plus the carrier order and the one this login uses."""
        body = await super().diagnostics()
        try:
            login: str | None = login_key(await self._credentials())
        except BridgeError:
            login = None
        body["carrier"] = self.carriers.snapshot(login)
        return body

    async def _through_carriers(
        self,
        request: ImageRequest,
        inputs: CodexInputs,
        model: str,
        bodies: dict[str, bytes],
        refused: list[ProviderAttempt],
        refused_by_login: dict[str, set[str]],
        credentials: CodexCredentials,
        state: CallState,
        context: ProviderContext,
    ) -> CallResult:
        """One call, starting at the carrier this login is known to accept.

        A plan refusal of the carrier (a 400 before any work ran) moves to the next one
        in the configured order; the first that answers is remembered for the login.
        """
        login = login_key(credentials)
        order = self.carriers.order
        index = self.carriers.start(login)
        already = refused_by_login.setdefault(login, set())  # by an earlier, retried call
        while index + 1 < len(order) and order[index] in already:
            index += 1
        while True:
            carrier = order[index]
            if carrier not in bodies:
                bodies[carrier] = await self._encoded_body(request, inputs, model, carrier)
            began = time.monotonic()
            try:
                result = await self._exchange(bodies[carrier], credentials, state, context)
            except BridgeError as error:
                if not is_plan_model_refusal(error):
                    raise
                already.add(carrier)
                refused.append(
                    ProviderAttempt(
                        provider=self.name,
                        model=carrier,
                        outcome=ProviderAttemptOutcome.FAILED,
                        error_code=error.code,
                        duration_ms=max(0, int((time.monotonic() - began) * 1000)),
                    )
                )
                if index + 1 >= len(order):
                    raise error.with_suggestion(CARRIER_SUGGESTION) from None
                index += 1
                self.calls += 1
                state.extra_calls += 1
                continue
            self.carriers.accept(login, index)
            return result

    async def _encoded_body(
        self, request: ImageRequest, inputs: CodexInputs, model: str, carrier: str
    ) -> bytes:
        def encode() -> bytes:
            return encode_json_body(
                responses_request_body(
                    request,
                    inputs,
                    image_model=model,
                    responses_model=carrier,
                )
            )

        return await self._encode(encode, inputs)

    async def _exchange(
        self,
        body: bytes,
        credentials: CodexCredentials,
        state: CallState,
        context: ProviderContext,
    ) -> CallResult:
        headers = build_responses_headers(credentials)
        async with self._post(
            self.options.endpoint, headers, body, credentials, state, context
        ) as response:
            await context.emit(ProgressEvent(stage="generating"))
            result = await self._read_stream(response, credentials, state, context)
        image = await verified_image(
            result.image_b64,
            max_base64_chars=self.options.max_base64_chars,
            limits=self.options.image_limits,
        )
        state.output_seen = True
        return CallResult(image=image, revised_prompt=result.revised_prompt, usage=result.usage)

    async def _read_stream(
        self,
        response: httpx.Response,
        credentials: CodexCredentials,
        state: CallState,
        context: ProviderContext,
    ) -> ResponsesResult:
        """Fold the SSE stream; stop reading at the first in-stream failure."""
        decoder = SseDecoder(self.options.sse_limits)
        stream = ResponsesStreamState(
            output_index=0,
            max_base64_chars=self.options.max_base64_chars,
            secrets=credentials.secret_values(),
            keep_partials=False,  # forwarded as they arrive; never buffered
        )
        async for chunk in response.aiter_bytes():
            for event in decoder.feed(chunk):
                await self._on_event(stream, event, state, context)
            if stream.failure is not None:
                break
        else:
            for event in decoder.close():
                await self._on_event(stream, event, state, context)
        return stream.finish()

    @staticmethod
    async def _on_event(
        stream: ResponsesStreamState, event: SseEvent, state: CallState, context: ProviderContext
    ) -> None:
        partial = await stream.ahandle(event)
        if partial is None:
            return
        state.output_seen = True
        await context.emit(
            PartialImageEvent(index=0, partial_index=partial.partial_index, b64_json=partial.b64)
        )
