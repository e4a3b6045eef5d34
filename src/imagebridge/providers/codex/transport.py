"""What both Codex HTTP providers share: one guarded upstream call, one retry rule, one answer.

Each upstream call reads the ChatGPT login fresh, runs under the request deadline and the
caller's cancellation token, and records how far it got (:class:`CallState`): not sent,
sent, answered with 2xx, image data seen. That record decides how a failure is reported:

* nothing sent (connection refused, deadline already gone) → the error as classified;
* sent, then interrupted (deadline, cancellation, broken or stalled connection) or a 2xx
  answer that cannot be understood → ``details.outcome = "unknown"``, never retried or
  rerouted: the image may exist and be billed;
* a definite upstream answer (HTTP status, in-stream failure) → its classification, which
  :class:`TransientRetryPolicy` may retry once when nothing reached the caller yet.

The rate-limit headers of every answer feed the quota client; :meth:`diagnostics` shows
the cached plan windows (never an account id). Nothing here logs or returns a token,
an account id, a prompt or image bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import httpx

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import GeneratedImage, ImageResponse, Timings, Usage
from imagebridge.engine.interruption import wait_unless_interrupted
from imagebridge.engine.provider import Provider, ProviderContext, inline_image
from imagebridge.imaging.inspect import ImageLimits, inspect_image
from imagebridge.providers.codex.auth import (
    CodexCredentials,
    CredentialsLoader,
    RefreshingCredentialsLoader,
    load_codex_credentials_async,
)
from imagebridge.providers.codex.http import CodexHttpClient, read_limited
from imagebridge.providers.codex.inputs import CodexInputBounds, CodexInputs, codex_inputs
from imagebridge.providers.codex.quota import DEFAULT_QUOTA_CACHE_MS, CodexQuotaClient
from imagebridge.providers.codex.retries import (
    RETRY_WARNING,
    TransientRetryPolicy,
    sleep_unless_cancelled,
)
from imagebridge.providers.codex.wire import (
    MAX_BASE64_CHARS,
    MAX_ERROR_BODY_BYTES,
    TokenUsage,
    classify_http_error,
    decode_image_base64,
    transport_error,
    upstream_request_id,
)

__all__ = ["CallState", "CodexHttpProvider", "CodexOptions"]

logger = logging.getLogger("imagebridge.providers.codex")

_MIN_TIMEOUT_S: Final = 0.001
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CodexOptions:
    """Settings both Codex HTTP providers take (every bound has the original's default)."""

    name: str = ""
    """The registered name (empty: the provider's own)."""
    usage_endpoint: str = ""
    """``GET …/backend-api/wham/usage`` on the same backend (empty: derived)."""
    max_transient_attempts: int = 2
    transient_retry_backoff_ms: int = 750
    quota_cache_ms: int = DEFAULT_QUOTA_CACHE_MS
    max_base64_chars: int = MAX_BASE64_CHARS
    max_error_body_bytes: int = MAX_ERROR_BODY_BYTES
    image_limits: ImageLimits = field(default_factory=ImageLimits)
    input_bounds: CodexInputBounds = field(default_factory=CodexInputBounds)


@dataclass(slots=True)
class CallState:
    """How far one upstream call got; decides how its failure is reported."""

    dispatched: bool = False
    """The request may have reached the backend."""
    answered: bool = False
    """A 2xx answer began: the backend accepted the work."""
    output_seen: bool = False
    """Image data of this call (partial or final) arrived."""
    request_id: str | None = None
    """The backend's request id, for support."""
    credentials: CodexCredentials | None = field(default=None, repr=False)
    """The login this call was sent with (a 401 names the token to refresh)."""


@dataclass(frozen=True, slots=True)
class CallResult:
    """One verified image and what came with it."""

    image: GeneratedImage
    revised_prompt: str | None
    usage: TokenUsage | None


Attempt = Callable[[CodexCredentials, CallState], Awaitable[CallResult]]


class CodexHttpProvider(Provider):
    """Base of ``codex-responses`` and ``codex-images`` (one output per call)."""

    def __init__(
        self,
        options: CodexOptions,
        *,
        credentials_loader: CredentialsLoader = load_codex_credentials_async,
    ) -> None:
        self._options = options
        self._retry = TransientRetryPolicy(
            options.max_transient_attempts, options.transient_retry_backoff_ms
        )
        self._load_credentials = credentials_loader
        self._http = CodexHttpClient()
        self.quota = CodexQuotaClient(
            self._http.get, options.usage_endpoint, options.quota_cache_ms, credentials_loader
        )
        self.calls = 0
        """Upstream calls started (for tests and diagnostics; never reset)."""

    # -- readiness, diagnostics, lifecycle ---------------------------------------------------

    async def check_ready(self) -> None:
        """Ready when the ChatGPT login loads (no network call)."""
        await self._credentials()

    async def diagnostics(self) -> dict[str, Any]:
        """The plan's usage windows (cached; read from ``wham/usage`` when stale)."""
        status = await self.quota.status()
        quota: dict[str, Any] = {"status": status.state}
        if status.snapshot is not None:
            quota.update(status.snapshot.to_dict())
        if status.error_code is not None:
            quota["error"] = {"code": status.error_code, "message": status.message}
        return {"provider": self.name, "quota": quota}

    async def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            await self._http.aclose()

    # -- one call with its retry ------------------------------------------------------------

    async def _credentials(self) -> CodexCredentials:
        try:
            return await self._load_credentials()
        except BridgeError as error:
            raise error.with_provider(self.name) from None

    async def _prepare(
        self, request: ImageRequest, context: ProviderContext, default_model: str
    ) -> tuple[str, CodexInputs]:
        """What every call settles before it is sent: one output, a served model, the inputs."""
        if request.parameters.n != 1:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "the Codex provider produces one output per call; larger counts use fan-out",
                provider=self.name,
            )
        model = (await self.capabilities(request.routing.model)).model or default_model
        inputs = codex_inputs(
            request, context.inputs, self._options.input_bounds, provider=self.name
        )
        return model, inputs

    async def _encode(self, encode: Callable[[], T], inputs: CodexInputs) -> T:
        """Build the request body; input images make that megabytes of base64 work, so it
        then runs in a worker thread."""
        try:
            return await asyncio.to_thread(encode) if inputs.present else encode()
        except BridgeError as error:
            raise error.with_provider(self.name) from None

    async def _call(
        self,
        request: ImageRequest,
        context: ProviderContext,
        inputs: CodexInputs,
        attempt: Attempt,
    ) -> tuple[CallResult, int]:
        """Run ``attempt`` until it succeeds or may not be repeated; returns (result, calls)."""
        number = 0
        refreshed = False
        while True:
            number += 1
            state = CallState()
            try:
                return await self._attempt(attempt, state, context), number
            except BridgeError as raw:
                if not refreshed and self._refreshable(raw, state):
                    refreshed = True
                    await self._refresh_rejected(state)
                    continue
                error = self._settle(raw, state, request, inputs)
            delay = self._retry.delay_before_next(
                error,
                number,
                output_seen=state.output_seen,
                remaining_s=context.deadline.remaining(),
            )
            if delay is None:
                error.details["provider_attempts"] = number
                raise error
            logger.warning(
                "%s: transient upstream failure (%s), retrying once in %.3f s",
                self.name,
                error.code.value,
                delay,
            )
            if not await sleep_unless_cancelled(delay, context.cancellation):
                raise BridgeError(
                    ErrorCode.CANCELLED,
                    "The generation was cancelled while waiting to retry a failed call.",
                    provider=self.name,
                    details={"provider_attempts": number},
                )

    def _refreshable(self, error: BridgeError, state: CallState) -> bool:
        """A 401 on an own login (one that can refresh) before any answer began.

        Repeating the call after a refresh is safe only because of what a 401 means: the
        backend refused the request at the door, before any image work (or billing) ran.
        Nothing else is ever repeated this way, and only once per call: a second 401
        after a refresh is the caller's ``authentication`` error, never a loop.
        """
        return (
            error.code is ErrorCode.AUTHENTICATION
            and error.details.get("http_status") == 401
            and not state.answered
            and not state.output_seen
            and state.credentials is not None
            and isinstance(self._load_credentials, RefreshingCredentialsLoader)
        )

    async def _refresh_rejected(self, state: CallState) -> None:
        loader = self._load_credentials
        assert isinstance(loader, RefreshingCredentialsLoader)
        assert state.credentials is not None
        refresh = loader.refresh_rejected
        logger.info("%s: the backend refused the login (401); refreshing it once", self.name)
        try:
            await refresh(state.credentials)
        except BridgeError as error:
            raise error.with_provider(self.name) from None

    async def _attempt(
        self, attempt: Attempt, state: CallState, context: ProviderContext
    ) -> CallResult:
        if context.cancellation.cancelled:
            raise BridgeError(
                ErrorCode.CANCELLED, "The generation was cancelled before it was sent."
            )
        if context.deadline.expired:
            raise BridgeError(
                ErrorCode.TIMEOUT,
                "The request deadline elapsed before the Codex call was sent.",
                retryable=True,
            )
        credentials = await self._credentials()
        state.credentials = credentials
        self.calls += 1
        return await self._guarded(attempt(credentials, state), state, context)

    async def _guarded(
        self, work: Awaitable[CallResult], state: CallState, context: ProviderContext
    ) -> CallResult:
        """``work`` under the deadline and cancellation; an interruption closes the call."""
        task = asyncio.ensure_future(work)
        if not await wait_unless_interrupted(
            task, context.cancellation, context.deadline.remaining()
        ):
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)  # the connection is closed
        if task.done() and not task.cancelled():
            exc = task.exception()
            if exc is None:
                return task.result()
            if isinstance(exc, BridgeError):
                raise exc
            raise BridgeError(
                ErrorCode.INTERNAL, "The Codex provider failed unexpectedly."
            ).mark_unknown_outcome() from exc
        timed_out = context.deadline.expired or context.cancellation.reason == "deadline"
        if timed_out:
            error = BridgeError(
                ErrorCode.TIMEOUT,
                "The request deadline elapsed while waiting for the Codex backend.",
                retryable=not state.dispatched,
            )
        else:
            error = BridgeError(
                ErrorCode.CANCELLED, "The generation was cancelled during the Codex call."
            )
        if state.dispatched:
            error.mark_unknown_outcome()
        raise error

    def _settle(
        self, error: BridgeError, state: CallState, request: ImageRequest, inputs: CodexInputs
    ) -> BridgeError:
        """Attach what the caller needs to act on the failure of one call."""
        if state.answered and error.code is ErrorCode.PROTOCOL:
            error.mark_unknown_outcome()  # the backend accepted and may have billed the work
        if error.upstream_request_id is None:
            error.upstream_request_id = state.request_id
        if error.code is ErrorCode.SAFETY_REJECTED:
            error.details["requested_moderation"] = request.parameters.moderation.value
            error.details["input_images_present"] = inputs.present
        return error.with_provider(self.name)

    # -- HTTP --------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _post(
        self,
        url: str,
        headers: dict[str, str],
        content: bytes,
        credentials: CodexCredentials,
        state: CallState,
        context: ProviderContext,
    ) -> AsyncIterator[httpx.Response]:
        """POST and yield a 2xx streaming answer; any other status raises its classification."""
        client = self._http.get()
        request = client.build_request(
            "POST",
            url,
            headers=headers,
            content=content,
            timeout=httpx.Timeout(max(context.deadline.remaining(), _MIN_TIMEOUT_S)),
        )
        state.dispatched = True
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise transport_error(exc) from None
        try:
            self.quota.update_from_headers(response.headers)
            state.request_id = upstream_request_id(response.headers)
            if not response.is_success:
                body = await self._error_body(response)
                raise classify_http_error(
                    response.status_code,
                    response.headers,
                    body,
                    secrets=credentials.secret_values(),
                    max_body_bytes=self._options.max_error_body_bytes,
                )
            state.answered = True
            try:
                yield response
            except httpx.HTTPError as exc:
                raise transport_error(exc) from None
        finally:
            await response.aclose()

    async def _error_body(self, response: httpx.Response) -> bytes:
        """The first bytes of an error answer (only a code is ever read from them)."""
        try:
            body, _ = await read_limited(response, self._options.max_error_body_bytes)
        except httpx.HTTPError:
            return b""
        return body

    # -- the answer ------------------------------------------------------------------------

    async def _verified_image(self, b64: str) -> GeneratedImage:
        """Decode and inspect the final image in a worker thread (it can be megabytes)."""
        options = self._options

        def decode() -> GeneratedImage:
            text = b64.strip()
            data = decode_image_base64(text, max_chars=options.max_base64_chars)
            try:
                info = inspect_image(data, options.image_limits)
            except BridgeError as error:
                raise BridgeError(
                    ErrorCode.PROTOCOL,
                    "The Codex backend sent an image that could not be verified.",
                    details={"stage": "image", "reason": error.message},
                ) from None
            return inline_image(0, text, info)

        return await asyncio.to_thread(decode)

    def _response(
        self,
        request: ImageRequest,
        context: ProviderContext,
        model: str,
        result: CallResult,
        calls: int,
        started: float,
    ) -> ImageResponse:
        elapsed = max(0, int((time.monotonic() - started) * 1000))
        image = result.image
        image.generation_ms = elapsed
        usage = result.usage.to_dict() if result.usage is not None else {}
        return ImageResponse(
            id=context.request_id,
            created=int(time.time()),
            provider=self.name,
            model=model,
            requested=request.parameters.model_copy(deep=True),
            effective=request.parameters.model_copy(deep=True),
            data=[image],
            revised_prompt=result.revised_prompt,
            usage=Usage.model_validate(usage),
            timings=Timings(provider_ms=elapsed, total_ms=elapsed),
            warnings=[RETRY_WARNING] if calls > 1 else [],
        )
