"""The ``openai`` provider: the OpenAI Images API (or a compatible server) over HTTP (aiohttp).

``/images/generations`` takes JSON; ``/images/edits`` takes multipart (``image[]``
repeated, ``mask``), and also serves generation from reference images. With
``partial_images`` the call streams (SSE) and every preview becomes a
:class:`PartialImageEvent`. One call asks for up to the model's native ``n``; the
application wraps the provider in the fan-out decorator for larger counts.

Safety of the upstream call: nothing is ever retried here. A trace hook
(:mod:`imagebridge.providers.openai.upstream`, on aiohttp) records the moment a connection to
the upstream is in hand; a failure before that (connect error, connect timeout, cancellation
while connecting) is a retryable ``upstream`` error, and any failure after it (timeout,
disconnect, a truncated or oversized body, a broken stream) is marked ``outcome: unknown``.
Credentials are read from the environment at call time, sent only as headers, and never
logged, stored, or put in errors or reprs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from imagebridge._version import __version__
from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import PartialImageEvent, ProgressEvent, StartedEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import (
    ImageResponse,
)
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.interruption import wait_unless_interrupted
from imagebridge.engine.provider import Provider, ProviderContext
from imagebridge.imaging.inspect import ImageLimits
from imagebridge.providers.openai.edits import UpstreamCall, prepare_call
from imagebridge.providers.openai.models import (
    DEFAULT_OPENAI_MODEL,
    KNOWN_OPENAI_MODELS,
    CapabilityOverrides,
    ModelProfile,
    apply_overrides,
    is_documented_model,
    profile_for,
)
from imagebridge.providers.openai.results import (
    Answer,
    OutputFetcher,
    ResultReader,
    start_reading,
    unusable_answer,
)
from imagebridge.providers.openai.upstream import (
    CallTrace,
    UpstreamSession,
    failure_kind,
    json_payload,
    multipart_payload,
    read_body,
    read_prefix,
)
from imagebridge.providers.openai.wire import (
    MAX_ERROR_BODY_BYTES,
    StreamState,
    WireResult,
    classify_http_error,
)
from imagebridge.providers.sse import SseDecoder, SseLimits

__all__ = [
    "DEFAULT_OPENAI_MODEL",
    "OPENAI_PROVIDER",
    "OpenAIImagesProvider",
    "OpenAIImagesSettings",
]

logger = logging.getLogger("imagebridge.providers.openai")

OPENAI_PROVIDER = "openai"
MiB = 1024 * 1024
_PROVIDER_NAME = re.compile(r"[a-z][a-z0-9-]{0,63}")
_HEADER_VALUE = re.compile(r"[\x21-\x7e]{1,4096}")


@dataclass(frozen=True, slots=True)
class OpenAIImagesSettings:
    """One OpenAI-style upstream. Holds variable *names*, never credentials."""

    name: str = OPENAI_PROVIDER
    display_name: str = "OpenAI Images API"
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str | None = "OPENAI_API_KEY"
    organization_env: str | None = "OPENAI_ORG_ID"
    project_env: str | None = "OPENAI_PROJECT_ID"
    models: tuple[str, ...] = KNOWN_OPENAI_MODELS
    """Served models; the first is the default."""
    native_max_outputs: int | None = None
    """Per-call ``n``; ``None`` uses each model's profile (documented models never exceed it)."""
    max_outputs: int = 255
    """Most images per request; also caps the per-call ``n``."""
    overrides: CapabilityOverrides | None = None
    timeout_ms: int | None = None
    """Bound on one upstream call, on top of the request deadline."""
    connect_timeout_ms: int = 10_000
    max_response_bytes: int = 256 * MiB
    """Most bytes read from one successful response (JSON or stream)."""
    max_base64_chars: int = 128 * MiB
    max_error_body_bytes: int = MAX_ERROR_BODY_BYTES
    max_stream_events: int = 10_000
    """Most SSE events accepted from one streamed call."""
    image_limits: ImageLimits = field(default_factory=ImageLimits)
    experimental: bool = False

    def __post_init__(self) -> None:
        problems = []
        if not _PROVIDER_NAME.fullmatch(self.name):
            problems.append("the provider name is not a lowercase identifier")
        if not self.models or any(not m.strip() for m in self.models):
            problems.append("at least one non-empty model name is required")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append("base_url must be an http(s) URL")
        if parts.username is not None or parts.password is not None or parts.fragment:
            problems.append("base_url must not carry credentials or a fragment")
        if parts.query or "?" in self.base_url:
            problems.append("base_url must not carry a query (routes are appended to its path)")
        if self.native_max_outputs is not None and not 1 <= self.native_max_outputs <= 255:
            problems.append("native_max_outputs must be between 1 and 255")
        if not 1 <= self.max_outputs <= 255:
            problems.append("max_outputs must be between 1 and 255")
        for name in (
            "connect_timeout_ms",
            "max_response_bytes",
            "max_base64_chars",
            "max_error_body_bytes",
            "max_stream_events",
        ):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive")
        if self.timeout_ms is not None and self.timeout_ms <= 0:
            problems.append("timeout_ms must be positive")
        if problems:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "OpenAI provider settings are invalid: " + "; ".join(problems),
                details={"provider": self.name},
            )

    @property
    def default_model(self) -> str:
        return self.models[0]

    @property
    def loopback(self) -> bool:
        host = (urlsplit(self.base_url).hostname or "").lower()
        return host in ("localhost", "::1") or host.startswith("127.")


@dataclass(frozen=True, slots=True)
class _Credentials:
    headers: dict[str, str] = field(repr=False)
    secrets: tuple[str, ...] = field(repr=False)


class OpenAIImagesProvider(Provider):
    """Image generation through an OpenAI-style Images API."""

    def __init__(
        self,
        settings: OpenAIImagesSettings | None = None,
        *,
        output_fetcher: OutputFetcher | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings or OpenAIImagesSettings()
        self._results = ResultReader(self.settings.name, self.settings.image_limits, output_fetcher)
        self._environ = environ
        self._upstream = UpstreamSession(trust_env=not self.settings.loopback)
        self._profiles = {model: self._profile(model) for model in self.settings.models}
        self._documents: dict[str, ProviderCapabilities] = {}
        self.calls = 0
        """Upstream calls attempted (for tests and diagnostics)."""

    def __repr__(self) -> str:
        return f"OpenAIImagesProvider(name={self.name!r}, base_url={self.settings.base_url!r})"

    # -- identity and capabilities -------------------------------------------------------

    @property
    def descriptor(self) -> ProviderDescriptor:
        return ProviderDescriptor(
            name=self.settings.name,
            display_name=self.settings.display_name,
            version=__version__,
            experimental=self.settings.experimental,
            models=list(self.settings.models),
        )

    def native_counts(self) -> dict[str, int]:
        """Per-call output count of each served model (the fan-out decision uses it)."""
        return {model: profile.native_max for model, profile in self._profiles.items()}

    def _profile(self, model: str) -> ModelProfile:
        profile = profile_for(model)
        limit = self.settings.native_max_outputs or profile.native_max
        if is_documented_model(model):
            limit = min(limit, profile.native_max)
        limit = min(limit, self.settings.max_outputs)
        profile = apply_overrides(profile.with_native_max(limit), self.settings.overrides)
        try:
            profile.capabilities(self.settings.name, model).validate_consistency()
        except (BridgeError, ValueError) as exc:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "the capability overrides describe an inconsistent model",
                details={"provider": self.settings.name, "model": model},
            ) from exc
        return profile

    def _resolve(self, model: str | None) -> tuple[str, ModelProfile]:
        chosen = model or self.settings.default_model
        profile = self._profiles.get(chosen)
        if profile is None:
            raise self._unserved_model(chosen, self.settings.models)
        return chosen, profile

    async def capabilities(self, model: str | None) -> ProviderCapabilities:
        chosen, profile = self._resolve(model)
        document = self._documents.get(chosen)
        if document is None:
            document = self._documents[chosen] = profile.capabilities(self.name, chosen)
        # the document depends only on the settings: built and validated once per model
        # (~0.3 ms of GIL-held pydantic work a request otherwise, bench/gateway.py c32)
        return document.model_copy()

    async def check_ready(self) -> None:
        self._credentials()

    # -- credentials ---------------------------------------------------------------------

    def _env(self, name: str) -> str | None:
        environ = self._environ if self._environ is not None else os.environ
        value = environ.get(name)
        return value if value else None

    def _credentials(self) -> _Credentials:
        """Headers from the configured variables, read now (never cached)."""
        settings = self.settings
        headers = {
            "User-Agent": f"imagegen-bridge/{__version__}",
            "Accept": "application/json, text/event-stream",
            # Uncompressed answers keep every byte bound exact (no decompression bombs).
            "Accept-Encoding": "identity",
        }
        secrets: list[str] = []
        named = (
            (settings.api_key_env, "Authorization", "api_key_env", True),
            (settings.organization_env, "OpenAI-Organization", "organization_env", False),
            (settings.project_env, "OpenAI-Project", "project_env", False),
        )
        for variable, header, field_name, required in named:
            if variable is None:
                continue
            value = self._env(variable)
            if value is None:
                if required:
                    raise BridgeError(
                        ErrorCode.AUTHENTICATION,
                        f"the API key variable {variable} is not set",
                        provider=self.name,
                        details={"field": field_name, "variable": variable},
                        suggestions=(
                            f"Export {variable} in the bridge's environment, or change "
                            f"providers.{field_name} in the configuration.",
                        ),
                    )
                continue
            if not _HEADER_VALUE.fullmatch(value):
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    f"the variable {variable} holds a value that cannot be sent as a header",
                    provider=self.name,
                    details={"field": field_name, "variable": variable},
                )
            secrets.append(value)
            headers[header] = f"Bearer {value}" if header == "Authorization" else value
        return _Credentials(headers=headers, secrets=tuple(secrets))

    async def shutdown(self) -> None:
        await self._upstream.aclose()

    # -- execution -------------------------------------------------------------------------

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        started = time.monotonic()
        model, profile = self._resolve(request.routing.model)
        params = request.parameters
        if params.n > profile.native_max:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "OpenAI provider received more outputs than one call may ask for",
                provider=self.name,
            )
        if profile.max_prompt_chars is not None and len(request.prompt) > profile.max_prompt_chars:
            raise BridgeError(
                ErrorCode.UNSUPPORTED_CAPABILITY,
                "prompt is longer than the model accepts",
                provider=self.name,
                details={"field": "prompt", "model": model, "limit": profile.max_prompt_chars},
            )
        credentials = self._credentials()
        await context.emit(StartedEvent())
        call = prepare_call(request, profile, model, context.inputs, provider=self.name)
        await context.emit(ProgressEvent(stage="generating"))
        pending = await self._guarded(call, credentials, request, context)
        try:
            answer = await pending
        except (ValueError, RecursionError):
            raise self._unusable("the upstream answer is not valid JSON") from None
        except BridgeError as error:
            raise self._unusable(error.message) from None
        return await self._results.response(request, model, answer, context.request_id, started)

    # -- the upstream exchange ---------------------------------------------------------------

    def _budget(self, context: ProviderContext) -> float:
        budget = context.deadline.remaining()
        if self.settings.timeout_ms is not None:
            budget = min(budget, self.settings.timeout_ms / 1000)
        return budget

    async def _guarded(
        self,
        call: UpstreamCall,
        credentials: _Credentials,
        request: ImageRequest,
        context: ProviderContext,
    ) -> asyncio.Future[Answer]:
        """Run the exchange under the call budget and the cancellation token."""
        state = CallTrace()
        if context.cancellation.cancelled:
            raise BridgeError(
                ErrorCode.CANCELLED,
                "generation was cancelled before it was sent",
                provider=self.name,
            )
        budget = self._budget(context)
        self.calls += 1
        exchange = asyncio.ensure_future(self._exchange(call, credentials, request, context, state))
        if await wait_unless_interrupted(exchange, context.cancellation, budget):
            return exchange.result()
        exchange.cancel()
        with contextlib.suppress(BaseException):
            await exchange
        if _is_cancelled(context.cancellation):
            error = BridgeError(ErrorCode.CANCELLED, "generation was cancelled", provider=self.name)
            if state.dispatched:
                error.mark_unknown_outcome()
            raise error
        if state.dispatched:
            raise BridgeError(
                ErrorCode.TIMEOUT,
                "the upstream did not finish within the time limit; the image may have been "
                "generated",
                provider=self.name,
                details={"stage": "response"},
            ).mark_unknown_outcome()
        raise BridgeError(
            ErrorCode.UPSTREAM,
            "could not reach the upstream within the time limit",
            retryable=True,
            provider=self.name,
            details={"stage": "connect"},
        )

    async def _exchange(
        self,
        call: UpstreamCall,
        credentials: _Credentials,
        request: ImageRequest,
        context: ProviderContext,
        state: CallTrace,
    ) -> asyncio.Future[Answer]:
        settings = self.settings
        budget = max(self._budget(context), 0.001)
        timeout = aiohttp.ClientTimeout(
            total=budget, sock_connect=min(budget, settings.connect_timeout_ms / 1000)
        )
        url = f"{settings.base_url.rstrip('/')}/images/{call.route}"
        headers = dict(credentials.headers)
        body: bytes | aiohttp.FormData
        if call.json_body is not None:
            body, content_type = json_payload(call.json_body)
            headers.update(content_type)
        else:
            body = multipart_payload(call.form or {}, call.files or [])
        try:
            async with self._upstream.post(
                url, headers=headers, body=body, timeout=timeout, trace=state
            ) as response:
                return await self._read(response, credentials, request, context, state)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._transport_error(exc, state) from None

    def _transport_error(self, exc: BaseException, state: CallTrace) -> BridgeError:
        kind = failure_kind(exc)
        if not state.dispatched:
            if isinstance(exc, aiohttp.InvalidURL):
                return BridgeError(
                    ErrorCode.CONFIGURATION,
                    "the upstream request could not be built",
                    provider=self.name,
                    details={"transport_error": kind},
                )
            return BridgeError(
                ErrorCode.UPSTREAM,
                "could not connect to the upstream",
                retryable=True,
                provider=self.name,
                details={"transport_error": kind, "stage": "connect"},
            )
        if isinstance(exc, TimeoutError):
            error = BridgeError(
                ErrorCode.TIMEOUT,
                "the upstream timed out mid-request; the image may have been generated",
                provider=self.name,
                details={"transport_error": kind, "stage": "response"},
            )
        else:
            error = BridgeError(
                ErrorCode.UPSTREAM,
                "the connection to the upstream failed mid-request; the image may have been "
                "generated",
                provider=self.name,
                details={"transport_error": kind, "stage": "response"},
            )
        return error.mark_unknown_outcome()

    async def _read(
        self,
        response: aiohttp.ClientResponse,
        credentials: _Credentials,
        request: ImageRequest,
        context: ProviderContext,
        state: CallTrace,
    ) -> asyncio.Future[Answer]:
        state.dispatched = True  # an answer proves the request reached the upstream
        status = response.status
        logger.debug("upstream answered", extra={"provider": self.name, "status": status})
        if not 200 <= status <= 299:
            try:
                body = await read_prefix(
                    response.content.iter_any(), self.settings.max_error_body_bytes
                )
            except (aiohttp.ClientError, TimeoutError):
                body = b""  # the status alone still says what happened
            raise classify_http_error(
                status, response.headers, body, secrets=credentials.secrets
            ).with_provider(self.name)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise self._unusable(
                "the upstream answer is compressed although none was asked for"
            ).with_detail("content_encoding", encoding[:32])
        n = request.parameters.n
        limit = self.settings.max_response_bytes
        declared = response.content_length  # aiohttp's parser already checked the header
        if declared is not None and declared > limit:
            raise self._too_large()
        content_type = response.headers.get("content-type", "").lower()
        if content_type.startswith("text/event-stream"):
            return _settled(Answer(await self._read_stream(response, n, context)))
        received = await read_body(response.content.iter_any(), declared, limit)
        if received is None:
            raise self._too_large()
        box = [received]  # the reader takes the body out: its buffer dies with the parse
        del received
        # parsed (a lone image checked too) in a thread that starts now, while the loop
        # receives other answers; awaited by execute, outside this exchange's budget
        return start_reading(
            box, self._results.limits, max_base64_chars=self.settings.max_base64_chars
        )

    async def _read_stream(
        self, response: aiohttp.ClientResponse, n: int, context: ProviderContext
    ) -> WireResult:
        settings = self.settings
        limits = SseLimits(
            max_line_bytes=settings.max_base64_chars + 64 * 1024,
            max_event_bytes=settings.max_base64_chars + 64 * 1024,
            max_stream_bytes=settings.max_response_bytes,
            max_events=settings.max_stream_events,
        )
        decoder = SseDecoder(limits)
        stream = StreamState(n, max_base64_chars=settings.max_base64_chars)

        async def apply(events: Any) -> None:
            for event in events:
                partial = stream.handle(event.event, event.data)
                if partial is not None:
                    await context.emit(
                        PartialImageEvent(
                            index=partial.index,
                            partial_index=partial.partial_index,
                            b64_json=partial.b64_json,
                        )
                    )

        try:
            async for chunk in response.content.iter_any():
                await apply(decoder.feed(chunk))
                if decoder.bytes_seen >= settings.max_response_bytes:
                    raise self._too_large()
            await apply(decoder.close())
        except BridgeError as error:
            if error.code is ErrorCode.PROTOCOL:
                raise self._unusable(error.message) from None
            raise error.with_provider(self.name) from None
        if not stream.images:
            raise BridgeError(
                ErrorCode.UPSTREAM,
                "the upstream stream ended before an image was completed",
                provider=self.name,
                details={"stage": "stream"},
            ).mark_unknown_outcome()
        return WireResult(images=stream.images, usage=stream.usage)

    def _too_large(self) -> BridgeError:
        return BridgeError(
            ErrorCode.PROTOCOL,
            "the upstream answer exceeds the configured response size",
            provider=self.name,
            details={"maximum_bytes": self.settings.max_response_bytes},
        ).mark_unknown_outcome()

    def _unusable(self, message: str) -> BridgeError:
        return unusable_answer(self.name, message)


def _settled(answer: Answer) -> asyncio.Future[Answer]:
    future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
    future.set_result(answer)
    return future


def _is_cancelled(token: CancelToken) -> bool:
    return token.cancelled
