"""The ``codex-images`` provider: the dedicated Codex images routes, as the codex CLI calls them.

``POST <base_url>/images/generations`` (no inputs) or ``/images/edits`` (input images as
data URLs) with the body and headers codex 0.169 sends: ``prompt``,
``background`` (``transparent`` for real alpha, otherwise ``opaque``), ``model``,
``quality: auto``, ``size``. It uses the same ChatGPT login, error rules, transient retry
and quota handling as ``codex-responses``. The backend follows the prompt more than the
parameters, so a requested shape is also written into the prompt, and the image's real
size is reported: the engine then records any difference as a normalization.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import httpx

from imagebridge._version import __version__
from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.enums import Background
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import ProgressEvent
from imagebridge.contract.request import ImageRequest, parse_aspect_ratio
from imagebridge.contract.response import ImageResponse, Normalization
from imagebridge.engine.provider import ProviderContext
from imagebridge.providers.codex.answer import image_response, verified_image
from imagebridge.providers.codex.auth import (
    CodexCredentials,
    CredentialsLoader,
    load_codex_credentials_async,
)
from imagebridge.providers.codex.base import CodexHttpProvider, CodexOptions
from imagebridge.providers.codex.capabilities import images_capabilities
from imagebridge.providers.codex.guarded_call import CallResult, CallState
from imagebridge.providers.codex.hints import (
    aspect_differs,
    ratio_of_size,
    reduced_ratio,
    with_aspect_line,
)
from imagebridge.providers.codex.http import read_limited
from imagebridge.providers.codex.inputs import CodexInputs
from imagebridge.providers.codex.pool import AccountPool
from imagebridge.providers.codex.wire import (
    DEFAULT_CODEX_BASE_URL,
    DEFAULT_IMAGE_MODEL,
    MAX_IMAGES_API_INPUTS,
    OFFLOAD_EVENT_CHARS,
    ImagesRequest,
    build_images_request,
    check_backend_url,
    parse_images_response,
    parse_json_body,
    wrap_prompt,
)

__all__ = [
    "CODEX_IMAGES_PROVIDER",
    "CodexImagesOptions",
    "CodexImagesProvider",
    "images_usage_url",
]

CODEX_IMAGES_PROVIDER: Final = "codex-images"
MiB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CodexImagesOptions(CodexOptions):
    """``[providers.codex_images]`` plus the shared Codex settings, as plain values."""

    base_url: str = DEFAULT_CODEX_BASE_URL
    model: str = DEFAULT_IMAGE_MODEL
    max_response_bytes: int = 256 * MiB
    """Largest JSON answer read (it carries the image as base64)."""


def images_usage_url(base_url: str) -> str:
    """``…/backend-api/codex`` → ``…/backend-api/wham/usage``."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/codex"):
        path = path[: -len("/codex")]
    return urlunsplit((parts.scheme, parts.netloc, f"{path}/wham/usage", "", ""))


def images_prompt(request: ImageRequest, inputs: CodexInputs) -> str:
    """The prompt sent: references explained in words, then the requested shape."""
    params = request.parameters
    prompt = wrap_prompt(
        request.prompt, request.operation.value, len(inputs.sources), len(inputs.references)
    )
    if params.aspect_ratio is not None:
        ratio: tuple[int, int] | None = parse_aspect_ratio(params.aspect_ratio)
    else:
        ratio = ratio_of_size(params.size)
    return with_aspect_line(prompt, ratio)


def _check_aspect(response: ImageResponse, ratio: tuple[int, int]) -> None:
    """Record, never hide, an image whose shape misses the requested aspect ratio.

    The route ignores ``size`` and follows the prompt's aspect line, so the shape is the
    only thing to verify for an ``aspect_ratio`` request (an explicit size is reconciled
    by the engine, which compares the exact dimensions).
    """
    for image in response.data:
        if aspect_differs(ratio, image.width, image.height):
            response.normalizations.append(
                Normalization(
                    field="parameters.aspect_ratio",
                    requested=f"{ratio[0]}:{ratio[1]}",
                    effective=reduced_ratio(image.width, image.height),
                    reason="provider_output_dimensions_differed",
                )
            )
            response.add_warning("provider_output_dimensions_differed")


class CodexImagesProvider(CodexHttpProvider):
    """Image generation and edits through ``…/backend-api/codex/images/*`` (JSON)."""

    def __init__(
        self,
        options: CodexImagesOptions | None = None,
        *,
        credentials_loader: CredentialsLoader = load_codex_credentials_async,
        pool: AccountPool | None = None,
    ) -> None:
        options = options or CodexImagesOptions()
        check_backend_url(options.base_url.rstrip("/"), field="base_url")
        if not options.model.strip():
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "The Codex images model must not be empty.",
                details={"field": "providers.codex_images.model"},
            )
        bounds = options.input_bounds
        if bounds.max_total_count > MAX_IMAGES_API_INPUTS:
            bounds = replace(bounds, max_total_count=MAX_IMAGES_API_INPUTS)
        options = replace(
            options,
            name=options.name or CODEX_IMAGES_PROVIDER,
            usage_endpoint=options.usage_endpoint or images_usage_url(options.base_url),
            input_bounds=bounds,
        )
        super().__init__(options, credentials_loader=credentials_loader, pool=pool)
        self.options = options

    @property
    def descriptor(self) -> ProviderDescriptor:
        return ProviderDescriptor(
            name=self.options.name,
            display_name="Codex images (direct)",
            version=__version__,
            experimental=True,
            models=[self.options.model],
        )

    async def capabilities(self, model: str | None) -> ProviderCapabilities:
        chosen = model or self.options.model
        if chosen != self.options.model:
            raise self._unserved_model(chosen[:128], [self.options.model])
        return images_capabilities(self.name, chosen, self.options.input_bounds)

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        started = time.monotonic()
        model, inputs = await self._prepare(request, context, self.options.model)
        prompt = images_prompt(request, inputs)
        background = (
            "transparent" if request.parameters.background is Background.TRANSPARENT else "opaque"
        )
        size = request.parameters.size

        async def attempt(credentials: CodexCredentials, state: CallState) -> CallResult:
            call = await self._build(credentials, prompt, inputs, background, size, model)
            return await self._exchange(call, credentials, state, context)

        served = await self._call(request, context, inputs, attempt)
        response = image_response(
            request, context, provider=self.name, model=model, served=served, started=started
        )
        if request.parameters.aspect_ratio is not None:
            _check_aspect(response, parse_aspect_ratio(request.parameters.aspect_ratio))
        return response

    async def _build(
        self,
        credentials: CodexCredentials,
        prompt: str,
        inputs: CodexInputs,
        background: str,
        size: str,
        model: str,
    ) -> tuple[ImagesRequest, bytes]:
        def build() -> tuple[ImagesRequest, bytes]:
            call = build_images_request(
                credentials,
                prompt,
                images=inputs.all,
                background=background,
                model=model,
                quality="auto",
                size=size,
                base_url=self.options.base_url,
                turn_id=str(uuid.uuid4()),
                max_images=self.options.input_bounds.max_total_count,
            )
            return call, call.content()

        return await self._encode(build, inputs)

    async def _exchange(
        self,
        call: tuple[ImagesRequest, bytes],
        credentials: CodexCredentials,
        state: CallState,
        context: ProviderContext,
    ) -> CallResult:
        images_request, content = call
        async with self._post(
            images_request.url, images_request.headers, content, credentials, state, context
        ) as response:
            await context.emit(ProgressEvent(stage="generating"))
            payload = await self._read_json(response)
        parsed = parse_images_response(payload, max_base64_chars=self.options.max_base64_chars)
        first = parsed.images[0]
        state.output_seen = True
        image = await verified_image(
            first.b64,
            max_base64_chars=self.options.max_base64_chars,
            limits=self.options.image_limits,
        )
        return CallResult(image=image, revised_prompt=first.revised_prompt, usage=parsed.usage)

    async def _read_json(self, response: httpx.Response) -> Any:
        limit = self.options.max_response_bytes
        body, overflow = await read_limited(response, limit)
        if overflow:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex images answer is larger than the configured limit.",
                details={"limit": "max_response_bytes", "max_response_bytes": limit},
            )
        if len(body) > OFFLOAD_EVENT_CHARS:
            return await asyncio.to_thread(parse_json_body, body, what="images response")
        return parse_json_body(body, what="images response")
