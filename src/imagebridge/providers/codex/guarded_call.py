"""One upstream call of the Codex HTTP providers, guarded, and how its failure is reported.

Each call runs under the request deadline and the caller's cancellation token, and records
how far it got (:class:`CallState`): not sent, sent, answered with 2xx, image data seen. That
record decides how a failure is reported:

* nothing sent (connection refused, deadline already gone) → the error as classified;
* sent, then interrupted (deadline, cancellation, broken or stalled connection) or a 2xx
  answer that cannot be understood → ``details.outcome = "unknown"``, never retried or
  rerouted: the image may exist and be billed;
* a definite upstream answer (HTTP status, in-stream failure) → its classification, which
  :class:`~.retries.TransientRetryPolicy` may retry once when nothing reached the caller yet.

Nothing here logs or returns a token, a prompt or image bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

import httpx

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import GeneratedImage
from imagebridge.engine.interruption import wait_unless_interrupted
from imagebridge.engine.provider import ProviderContext
from imagebridge.providers.codex.auth import CodexCredentials, RefreshingCredentialsLoader
from imagebridge.providers.codex.http import read_limited
from imagebridge.providers.codex.inputs import CodexInputs
from imagebridge.providers.codex.pool import PoolAccount
from imagebridge.providers.codex.wire import (
    TokenUsage,
    classify_http_error,
    transport_error,
    upstream_request_id,
)

__all__ = [
    "Attempt",
    "CallResult",
    "CallState",
    "guard",
    "post",
    "refreshable",
    "settle",
]

_MIN_TIMEOUT_S: Final = 0.001


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
    account: PoolAccount | None = field(default=None, repr=False)
    """The pool account the call runs on (its quota learns from the answer's headers)."""
    extra_calls: int = 0
    """Further upstream calls this attempt made itself (a refused carrier model's next one)."""


@dataclass(frozen=True, slots=True)
class CallResult:
    """One verified image and what came with it."""

    image: GeneratedImage
    revised_prompt: str | None
    usage: TokenUsage | None


Attempt = Callable[[CodexCredentials, CallState], Awaitable[CallResult]]
"""One provider's upstream call with a loaded login (the provider's own request and answer)."""


async def guard(
    work: Awaitable[CallResult], state: CallState, context: ProviderContext
) -> CallResult:
    """``work`` under the deadline and cancellation; an interruption closes the call."""
    task = asyncio.ensure_future(work)
    if not await wait_unless_interrupted(task, context.cancellation, context.deadline.remaining()):
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


def refreshable(error: BridgeError, state: CallState) -> bool:
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
        and state.account is not None
        and isinstance(state.account.spec.credentials, RefreshingCredentialsLoader)
    )


def settle(
    error: BridgeError,
    state: CallState,
    request: ImageRequest,
    inputs: CodexInputs,
    *,
    provider: str,
) -> BridgeError:
    """Attach what the caller needs to act on the failure of one call."""
    if state.answered and error.code is ErrorCode.PROTOCOL:
        error.mark_unknown_outcome()  # the backend accepted and may have billed the work
    if error.upstream_request_id is None:
        error.upstream_request_id = state.request_id
    if error.code is ErrorCode.SAFETY_REJECTED:
        error.details["requested_moderation"] = request.parameters.moderation.value
        error.details["input_images_present"] = inputs.present
    return error.with_provider(provider)


@contextlib.asynccontextmanager
async def post(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    content: bytes,
    credentials: CodexCredentials,
    state: CallState,
    context: ProviderContext,
    *,
    learn: Callable[[httpx.Headers], None],
    max_error_body_bytes: int,
) -> AsyncIterator[httpx.Response]:
    """POST and yield a 2xx streaming answer; any other status raises its classification.

    ``learn`` reads every answer's headers first (the account's rate-limit windows).
    """
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
        learn(response.headers)
        state.request_id = upstream_request_id(response.headers)
        if not response.is_success:
            body = await _error_body(response, max_error_body_bytes)
            raise classify_http_error(
                response.status_code,
                response.headers,
                body,
                secrets=credentials.secret_values(),
                max_body_bytes=max_error_body_bytes,
            )
        state.answered = True
        try:
            yield response
        except httpx.HTTPError as exc:
            raise transport_error(exc) from None
    finally:
        await response.aclose()


async def _error_body(response: httpx.Response, limit: int) -> bytes:
    """The first bytes of an error answer (only a code is ever read from them)."""
    try:
        body, _ = await read_limited(response, limit)
    except httpx.HTTPError:
        return b""
    return body
