"""What both Codex HTTP providers share: readiness, diagnostics, and the path of one call.

:class:`CodexHttpProvider` is the base of ``codex-responses`` (:mod:`.responses`) and
``codex-images`` (:mod:`.images`); each brings its own request and answer (an
:data:`~.guarded_call.Attempt`), and this class runs it:

1. :meth:`~CodexHttpProvider._prepare`: one output per call, a served model, the inputs;
2. :func:`~.account_failover.serve_on_accounts`: on the pool's accounts, moving on only
   after a refusal at the door;
3. :meth:`~CodexHttpProvider._call_on`: on one account, each call with a fresh login, one
   refresh after a 401 on an own login, and the one transient retry of :mod:`.retries`;
4. :mod:`.guarded_call`: the call itself under the deadline and cancellation, and how its
   failure is reported (never retried or rerouted once its outcome is unknown);
5. :mod:`.answer`: the image verified and the normalized response.

Every answer's rate-limit headers feed that account's quota reading (:mod:`.quota_readings`);
:meth:`~CodexHttpProvider.diagnostics` shows the cached plan windows and, with a pool, each
account (never an account id). Nothing here logs or returns a token, an account id, a prompt
or image bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from imagebridge.contract.accounts import DEFAULT_ACCOUNT
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.provider import AccountCounters, Provider, ProviderContext
from imagebridge.imaging.inspect import ImageLimits
from imagebridge.providers.codex.account_failover import CallTally, Served, serve_on_accounts
from imagebridge.providers.codex.auth import (
    CodexCredentials,
    CredentialsLoader,
    RefreshingCredentialsLoader,
    load_codex_credentials_async,
)
from imagebridge.providers.codex.guarded_call import (
    Attempt,
    CallResult,
    CallState,
    guard,
    post,
    refreshable,
    settle,
)
from imagebridge.providers.codex.http import CodexHttpClient
from imagebridge.providers.codex.inputs import CodexInputBounds, CodexInputs, codex_inputs
from imagebridge.providers.codex.pool import AccountLease, AccountPool, AccountSpec, PoolAccount
from imagebridge.providers.codex.quota import DEFAULT_QUOTA_CACHE_MS
from imagebridge.providers.codex.quota_readings import QuotaReadings
from imagebridge.providers.codex.retries import TransientRetryPolicy, sleep_unless_cancelled
from imagebridge.providers.codex.wire import MAX_BASE64_CHARS, MAX_ERROR_BODY_BYTES

__all__ = ["CodexHttpProvider", "CodexOptions"]

logger = logging.getLogger("imagebridge.providers.codex")

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
        """The accounts this provider's calls run on (shared with the other Codex ones)."""
        self._readings = QuotaReadings(self._http, options.usage_endpoint, options.quota_cache_ms)
        self.quota = self._readings.client(pool.default)
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
            await asyncio.gather(*(self._readings.read(a) for a in self.pool.accounts))
        status = await self.quota.status()
        self._readings.observe(self.pool.default, status.snapshot)
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
        return await self._readings.refresh(self.pool.accounts, self.name)

    async def shutdown(self) -> None:
        await self._readings.close()
        with contextlib.suppress(Exception):
            await self._http.aclose()

    # -- one call: prepared, run on the pool's accounts, each with its retry ---------------------

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
        self._readings.refresh_stale(self.pool)

        async def run(lease: AccountLease, states: list[CallState], tally: CallTally) -> CallResult:
            return await self._call_on(lease, request, context, inputs, attempt, states, tally)

        return await serve_on_accounts(self.pool, self.name, context, run)

    async def _call_on(
        self,
        lease: AccountLease,
        request: ImageRequest,
        context: ProviderContext,
        inputs: CodexInputs,
        attempt: Attempt,
        states: list[CallState],
        tally: CallTally,
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
                if not refreshed and refreshable(raw, state):
                    refreshed = True
                    await self._refresh_rejected(state)
                    continue
                error = settle(raw, state, request, inputs, provider=self.name)
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

    async def _refresh_rejected(self, state: CallState) -> None:
        """Refresh the own login a 401 refused (see :func:`~.guarded_call.refreshable`)."""
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
        return await guard(attempt(credentials, state), state, context)

    def _post(
        self,
        url: str,
        headers: dict[str, str],
        content: bytes,
        credentials: CodexCredentials,
        state: CallState,
        context: ProviderContext,
    ) -> contextlib.AbstractAsyncContextManager[httpx.Response]:
        """POST and yield a 2xx streaming answer (see :func:`~.guarded_call.post`); its
        rate-limit headers feed the quota reading of the call's account."""

        def learn(answer_headers: httpx.Headers) -> None:
            self._readings.learn(state.account or self.pool.default, answer_headers)

        return post(
            self._http.get(),
            url,
            headers,
            content,
            credentials,
            state,
            context,
            learn=learn,
            max_error_body_bytes=self._options.max_error_body_bytes,
        )
