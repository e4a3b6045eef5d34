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

Each call runs on an account of the pool (:mod:`imagebridge.providers.codex.pool`): one
implicit account without ``[accounts.pool]``, else the one the pool's policy picks. A
refusal at the door (quota, throttling, login, plan: :mod:`.pool.failover`) moves the call
to the next ready account; nothing else does, and never an unknown outcome.

The rate-limit headers of every answer feed that account's quota reading; :meth:`diagnostics`
shows the cached plan windows and, with a pool, each account (never an account id). Nothing
here logs or returns a token, an account id, a prompt or image bytes.
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

from imagebridge.contract.accounts import DEFAULT_ACCOUNT
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import (
    GeneratedImage,
    ImageResponse,
    Timings,
    Usage,
)
from imagebridge.engine.interruption import wait_unless_interrupted
from imagebridge.engine.provider import AccountCounters, Provider, ProviderContext, inline_image
from imagebridge.engine.served import mark_served
from imagebridge.imaging.inspect import ImageLimits, inspect_image
from imagebridge.providers.codex.auth import (
    CodexCredentials,
    CredentialsLoader,
    RefreshingCredentialsLoader,
    load_codex_credentials_async,
)
from imagebridge.providers.codex.http import CodexHttpClient, read_limited
from imagebridge.providers.codex.inputs import CodexInputBounds, CodexInputs, codex_inputs
from imagebridge.providers.codex.pool import (
    AccountLease,
    AccountPool,
    AccountSpec,
    PoolAccount,
    Tried,
    record_failover,
    tried_details,
)
from imagebridge.providers.codex.quota import DEFAULT_QUOTA_CACHE_MS, CodexQuotaClient
from imagebridge.providers.codex.retries import (
    RETRY_WARNING,
    TransientRetryPolicy,
    sleep_unless_cancelled,
)
from imagebridge.providers.codex.wire import (
    MAX_BASE64_CHARS,
    MAX_ERROR_BODY_BYTES,
    QuotaSnapshot,
    TokenUsage,
    classify_http_error,
    decode_image_base64,
    transport_error,
    upstream_request_id,
)

__all__ = ["CallState", "CodexHttpProvider", "CodexOptions", "Served"]

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


@dataclass(frozen=True, slots=True)
class Served:
    """What one call produced, how many upstream calls it took and on which account."""

    result: CallResult
    calls: int
    """Upstream calls made, on every account (refused carriers and retries included)."""
    repeated: bool
    """A call was repeated on one account (the transient retry, or after a refresh)."""
    account: str
    tried: tuple[Tried, ...] = ()


@dataclass(slots=True)
class _Tally:
    calls: int = 0
    repeated: bool = False


Attempt = Callable[[CodexCredentials, CallState], Awaitable[CallResult]]


class CodexHttpProvider(Provider):
    """Base of ``codex-responses`` and ``codex-images`` (one output per call)."""

    def __init__(
        self,
        options: CodexOptions,
        *,
        credentials_loader: CredentialsLoader = load_codex_credentials_async,
        pool: AccountPool | None = None,
    ) -> None:
        self._options = options
        self._retry = TransientRetryPolicy(
            options.max_transient_attempts, options.transient_retry_backoff_ms
        )
        self._http = CodexHttpClient()
        if pool is None:
            own = isinstance(credentials_loader, RefreshingCredentialsLoader)
            spec = AccountSpec(
                DEFAULT_ACCOUNT, credentials_loader, kind="own" if own else "codex_home"
            )
            pool = AccountPool.single(spec)
        self.pool = pool
        """The accounts this transport's calls run on (shared with the other Codex ones)."""
        self._quotas: dict[str, CodexQuotaClient] = {}
        self._readings: dict[str, asyncio.Task[None]] = {}
        self.quota = self._quota_for(pool.default)
        """The first account's quota client (the only one without a pool)."""
        self.calls = 0
        """Upstream calls started (for tests and diagnostics; never reset)."""

    # -- readiness, diagnostics, lifecycle ---------------------------------------------------

    async def check_ready(self) -> None:
        """Ready when a login loads (no network call): the account's, or with a pool any
        account's; every pool account whose login does not load is skipped for the
        refusal cooldown."""
        if not self.pool.explicit:
            await self._credentials()
            return
        failures: list[BridgeError] = []
        for account in self.pool.accounts:
            try:
                await self._credentials(account)
            except BridgeError as error:
                self.pool.login_failed(account, error)
                failures.append(error)
        if len(failures) == len(self.pool.accounts):
            raise failures[0]

    async def diagnostics(self) -> dict[str, Any]:
        """The plan's usage windows (cached; read from ``wham/usage`` when stale); with a
        pool, every account as well (``accounts``: ready or why not, image windows,
        breaker, calls and failures of the last 24 hours)."""
        if self.pool.explicit:
            await asyncio.gather(*(self._read_quota(a) for a in self.pool.accounts))
        status = await self.quota.status()
        self._observe(self.pool.default, status.snapshot)
        quota: dict[str, Any] = {"status": status.state}
        if status.snapshot is not None:
            quota.update(status.snapshot.to_dict())
        if status.error_code is not None:
            quota["error"] = {"code": status.error_code, "message": status.message}
        body: dict[str, Any] = {"provider": self.name, "quota": quota}
        if self.pool.explicit:
            body["accounts"] = self.pool.describe(self.name)
        return body

    def account_counters(self) -> list[AccountCounters]:
        """With a pool, each account's counters (the metrics' ``account`` label)."""
        return self.pool.counters(self.name) if self.pool.explicit else []

    async def refresh_quota(self) -> BridgeError | None:
        """New ``wham/usage`` readings now, for every account (``providers quota
        --refresh``); the first failure, if any (the other readings are still taken)."""
        failed: BridgeError | None = None
        for account in self.pool.accounts:
            try:
                self._observe(account, await self._quota_for(account).get(force=True))
            except BridgeError as error:
                failed = failed or error.with_provider(self.name)
        return failed

    async def shutdown(self) -> None:
        readings = list(self._readings.values())
        for task in readings:
            task.cancel()
        if readings:
            await asyncio.gather(*readings, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._http.aclose()

    # -- accounts and their quota --------------------------------------------------------------

    def _quota_for(self, account: PoolAccount) -> CodexQuotaClient:
        client = self._quotas.get(account.name)
        if client is None:
            options = self._options
            client = CodexQuotaClient(
                self._http.get,
                options.usage_endpoint,
                options.quota_cache_ms,
                account.load_credentials,
            )
            self._quotas[account.name] = client
        return client

    @staticmethod
    def _observe(account: PoolAccount, snapshot: QuotaSnapshot | None) -> None:
        if snapshot is not None:
            account.observe(snapshot)

    async def _read_quota(self, account: PoolAccount) -> None:
        """A ``wham/usage`` reading of ``account`` (cached), fed to the pool; never raises."""
        status = await self._quota_for(account).status()
        self._observe(account, status.snapshot)

    def _refresh_stale_readings(self) -> None:
        """With a pool, read the quota of accounts whose reading is old, in the background
        (a call never waits for it; an account not read yet ranks with the best one read)."""
        if not self.pool.explicit:
            return
        stale_before = time.time() - self._options.quota_cache_ms / 1000
        for account in self.pool.accounts:
            snapshot = account.snapshot
            if snapshot is not None and snapshot.observed_at >= stale_before:
                continue
            if account.name in self._readings:
                continue
            task = asyncio.ensure_future(self._read_quota(account))
            self._readings[account.name] = task
            task.add_done_callback(self._reading_done)

    def _reading_done(self, task: asyncio.Task[None]) -> None:
        for name, running in list(self._readings.items()):
            if running is task:
                del self._readings[name]

    # -- one call with its retry ------------------------------------------------------------

    async def _credentials(self, account: PoolAccount | None = None) -> CodexCredentials:
        chosen = account or self.pool.default
        try:
            return await chosen.load_credentials()
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
    ) -> Served:
        """Run ``attempt`` on the pool's accounts until one serves it or it may not move on."""
        tried: list[Tried] = []
        tally = _Tally()
        self._refresh_stale_readings()
        while True:
            lease = await self._lease(context, tried, tally.calls)
            began = time.monotonic()
            states: list[CallState] = []
            try:
                result = await self._call_on(
                    lease, request, context, inputs, attempt, states, tally
                )
            except BridgeError as error:
                last = states[-1] if states else CallState()
                refusal = lease.failed(
                    error,
                    answered=last.answered,
                    output_seen=any(state.output_seen for state in states),
                )
                if refusal is None:
                    raise self._on_account(error, lease, tried) from None
                tried.append(Tried(lease.name, error, refusal, _ms_since(began)))
                logger.info(
                    "%s: account %s refused the call (%s); trying the next account",
                    self.name,
                    lease.name,
                    refusal,
                )
                continue
            except BaseException:
                lease.abandon()
                raise
            else:
                lease.succeeded()
                return Served(result, tally.calls, tally.repeated, lease.name, tuple(tried))
            finally:
                lease.release()

    async def _lease(
        self, context: ProviderContext, tried: list[Tried], calls: int
    ) -> AccountLease:
        try:
            return await self.pool.acquire(
                self.name,
                deadline=context.deadline,
                cancellation=context.cancellation,
                tried=tried,
            )
        except BridgeError as error:
            if tried:
                error.details["provider_attempts"] = calls
            raise

    def _on_account(
        self, error: BridgeError, lease: AccountLease, tried: list[Tried]
    ) -> BridgeError:
        """With a pool, say which account failed and which refused before it."""
        if self.pool.explicit:
            error.details["account"] = lease.name
            if tried:
                error.details["accounts_tried"] = tried_details(tried)
        return error

    async def _call_on(
        self,
        lease: AccountLease,
        request: ImageRequest,
        context: ProviderContext,
        inputs: CodexInputs,
        attempt: Attempt,
        states: list[CallState],
        tally: _Tally,
    ) -> CallResult:
        """Run ``attempt`` on one account until it succeeds or may not be repeated. Each
        call's :class:`CallState` is appended to ``states``; ``tally`` counts the calls."""
        number = 0
        refreshed = False
        while True:
            number += 1
            tally.repeated = tally.repeated or number > 1
            state = CallState(account=lease.account)
            states.append(state)
            try:
                return await self._attempt(attempt, state, context)
            except BridgeError as raw:
                if not refreshed and self._refreshable(raw, state):
                    refreshed = True
                    await self._refresh_rejected(state)
                    continue
                error = self._settle(raw, state, request, inputs)
            finally:
                tally.calls += 1 + state.extra_calls
            delay = self._retry.delay_before_next(
                error,
                number,
                output_seen=state.output_seen,
                remaining_s=context.deadline.remaining(),
            )
            if delay is None:
                error.details["provider_attempts"] = tally.calls
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
                    details={"provider_attempts": tally.calls},
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
            and state.account is not None
            and isinstance(state.account.spec.credentials, RefreshingCredentialsLoader)
        )

    async def _refresh_rejected(self, state: CallState) -> None:
        assert state.account is not None
        loader = state.account.spec.credentials
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
        credentials = await self._credentials(state.account)
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
            account = state.account or self.pool.default
            self._observe(account, self._quota_for(account).update_from_headers(response.headers))
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
        served: Served,
        started: float,
    ) -> ImageResponse:
        elapsed = max(0, int((time.monotonic() - started) * 1000))
        result = served.result
        image = result.image
        image.generation_ms = elapsed
        usage = result.usage.to_dict() if result.usage is not None else {}
        response = ImageResponse(
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
            warnings=[RETRY_WARNING] if served.repeated else [],
        )
        if served.tried:
            record_failover(response, served.tried, served.account)
        mark_served(response, served.account)
        return response


def _ms_since(started: float) -> int:
    return max(0, int((time.monotonic() - started) * 1000))
