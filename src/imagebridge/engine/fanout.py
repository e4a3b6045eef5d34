"""Bounded multi-output emulation for providers whose native count is below ``n``.

This is the original's fan-out decorator: the request
is cut into chunks of the native size, chunks run in parallel or one at a time, a single
provider-wide pool of permits bounds every batch together, results are re-indexed into the
caller's order, and a fail-fast failure marks the whole batch ambiguous when siblings may
have run. Validation uses the runtime's configured limits (the original used core defaults,
capping fan-out at 16 outputs).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from imagebridge.contract.capabilities import (
    BatchCapabilities,
    ProviderCapabilities,
    U8Range,
)
from imagebridge.contract.enums import (
    BatchExecution,
    BatchMode,
    MultiImageFailurePolicy,
    SessionMode,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import PartialImageEvent, ProgressEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import (
    BridgeErrorBody,
    ImageFailure,
    ImageResponse,
    Normalization,
    SessionMetadata,
    Timings,
    Usage,
)
from imagebridge.engine import tracing
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.decorator import ProviderDecorator
from imagebridge.engine.negotiation import NegotiationResult, copy_parameters, negotiate_request
from imagebridge.engine.provider import Provider, ProviderContext, ProviderEventT
from imagebridge.engine.served import merge_served
from imagebridge.engine.spans import describe_answer, describe_failure
from imagebridge.engine.validation import RequestLimits, validate_request

__all__ = ["FAILED_SIBLING_GRACE", "FanoutProvider", "chunk_plan", "subrequest_id"]

FAILED_SIBLING_GRACE = 1.0
"""Seconds in-flight siblings get to settle after a fail-fast failure."""

MAX_SUBREQUEST_ID_BYTES = 128


def chunk_plan(total: int, native_max: int) -> list[tuple[int, int]]:
    """``(offset, count)`` pairs; the last chunk takes the remainder."""
    plan: list[tuple[int, int]] = []
    offset = 0
    while offset < total:
        count = min(native_max, total - offset)
        plan.append((offset, count))
        offset += count
    return plan


def subrequest_id(request_id: str, offset: int) -> str:
    suffix = f":output:{offset}"
    if len(request_id.encode()) + len(suffix) <= MAX_SUBREQUEST_ID_BYTES:
        return f"{request_id}{suffix}"
    digest = hashlib.sha256(request_id.encode()).hexdigest()[:32]
    return f"fanout:{digest}:{offset}"


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


@dataclass(slots=True)
class _ChunkResult:
    offset: int
    count: int
    elapsed_ms: int
    response: ImageResponse | None = None
    error: BridgeError | None = None


class FanoutProvider(ProviderDecorator):
    """Decorates a provider without changing its registry identity."""

    def __init__(
        self,
        inner: Provider,
        *,
        max_outputs: int,
        max_parallel_outputs: int,
        limits: RequestLimits,
    ) -> None:
        if max_outputs < 1 or max_parallel_outputs < 1 or max_parallel_outputs > max_outputs:
            raise BridgeError(ErrorCode.CONFIGURATION, "output fan-out limits are invalid")
        super().__init__(inner)
        self.max_outputs = max_outputs
        self.max_parallel_outputs = max_parallel_outputs
        self.limits = limits
        self._permits = asyncio.Semaphore(max_parallel_outputs)
        self._closed = False

    # -- identity is the inner provider's (ProviderDecorator) --------------------------

    async def shutdown(self) -> None:
        self._closed = True
        await super().shutdown()

    # -- capabilities --------------------------------------------------------------------

    def _effective(self, caps: ProviderCapabilities) -> ProviderCapabilities:
        caps.validate_consistency()
        if self.max_outputs <= caps.count.max:
            return caps
        effective = caps.model_copy(
            update={
                "count": U8Range(min=caps.count.min, max=self.max_outputs),
                "batching": BatchCapabilities(
                    mode=BatchMode.FAN_OUT,
                    native_count=caps.count.model_copy(),
                    max_parallel_outputs=self.max_parallel_outputs,
                ),
            }
        )
        effective.validate_consistency()
        return effective

    async def capabilities(self, model: str | None) -> ProviderCapabilities:
        return self._effective(await self.inner.capabilities(model))

    # -- execution -----------------------------------------------------------------------

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        validate_request(request, self.limits)
        native = await self.inner.capabilities(request.routing.model)
        negotiated = negotiate_request(request, self._effective(native))
        return await self._execute_effective(negotiated, context, native)

    @property
    def validates_requests(self) -> bool:
        return True  # both paths below validate against ``self.limits`` first

    async def execute_negotiated(
        self, request: ImageRequest, context: ProviderContext, caps: ProviderCapabilities
    ) -> ImageResponse:
        """:meth:`execute` for a request its caller already negotiated against ``caps``.

        ``caps`` must be what :meth:`capabilities` returned for the request's model (the
        runtime negotiates against it before calling). Negotiation is idempotent: a request
        it produced for a document comes out of a second negotiation against an equal
        document unchanged and with no normalizations. So while the inner provider still
        describes itself the same way, the second negotiation is skipped; if its document
        changed in between, the request is negotiated again exactly as :meth:`execute` does.
        Validation always runs: a merged negative prompt can exceed the prompt limit.
        """
        validate_request(request, self.limits)
        native = await self.inner.capabilities(request.routing.model)
        effective_caps = self._effective(native)
        if effective_caps == caps:
            negotiated = NegotiationResult(copy_parameters(request.parameters), request, [])
        else:
            negotiated = negotiate_request(request, effective_caps)
        return await self._execute_effective(negotiated, context, native)

    async def _execute_effective(
        self,
        negotiated: NegotiationResult,
        context: ProviderContext,
        native: ProviderCapabilities,
    ) -> ImageResponse:
        effective = negotiated.request
        if effective.parameters.n <= native.count.max:
            async with self._permit(context, context.cancellation):
                response = await self.inner.execute(effective, context)
        else:
            response = await self._fan_out(effective, context, native.count.max)
        response.requested = negotiated.requested
        response.effective = copy_parameters(effective.parameters)
        response.normalizations[0:0] = negotiated.normalizations
        return response

    @contextlib.asynccontextmanager
    async def _permit(
        self, context: ProviderContext, cancellation: CancelToken
    ) -> AsyncIterator[None]:
        """Hold one provider-wide permit, waiting at most until the deadline."""
        if self._closed:
            raise BridgeError(ErrorCode.CANCELLED, "output fan-out is shutting down")
        if self._permits.locked():
            await self._wait_for_permit(context, cancellation)
        else:  # a free permit: acquire() takes it without waiting, so there is nothing to race
            await self._permits.acquire()
        try:
            yield
        finally:
            self._permits.release()

    async def _wait_for_permit(self, context: ProviderContext, cancellation: CancelToken) -> None:
        """Wait for a permit until it is granted, the deadline passes or ``cancellation``."""
        acquire = asyncio.ensure_future(self._permits.acquire())
        cancelled = asyncio.ensure_future(cancellation.wait())
        granted = False
        try:
            done, _ = await asyncio.wait(
                {acquire, cancelled},
                timeout=context.deadline.remaining(),
                return_when=asyncio.FIRST_COMPLETED,
            )
            granted = acquire in done and not acquire.cancelled()
        finally:
            cancelled.cancel()
            if not granted:
                if acquire.done() and not acquire.cancelled():
                    self._permits.release()
                else:
                    acquire.cancel()
        if not granted:
            if cancellation.cancelled:
                raise BridgeError(
                    ErrorCode.CANCELLED, "output fan-out was cancelled while waiting for capacity"
                )
            raise BridgeError(
                ErrorCode.TIMEOUT,
                "output fan-out timed out while waiting for capacity",
                retryable=True,
            )

    async def _fan_out(
        self, request: ImageRequest, context: ProviderContext, native_max: int
    ) -> ImageResponse:
        started = time.monotonic()
        n = request.parameters.n
        policy = request.parameters.failure_policy
        execution = request.policies.batch_execution
        if execution is BatchExecution.PARALLEL or (
            execution is BatchExecution.AUTO and request.session.mode is SessionMode.ISOLATED
        ):
            batch_parallel = self.max_parallel_outputs
        else:
            batch_parallel = 1
        batch_cancel = context.cancellation.child()
        pending = deque(chunk_plan(n, native_max))
        active: set[asyncio.Task[_ChunkResult]] = set()
        results: list[_ChunkResult] = []

        def start_next() -> None:
            if pending:
                offset, count = pending.popleft()
                active.add(
                    asyncio.ensure_future(
                        self._run_chunk(request, context, batch_cancel, offset, count)
                    )
                )

        for _ in range(batch_parallel):
            start_next()
        try:
            while active:
                done, _ = await asyncio.wait(active, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=lambda t: t.result().offset):
                    active.discard(task)
                    result = task.result()
                    if policy is MultiImageFailurePolicy.FAIL_FAST and result.error is not None:
                        siblings_may_have_run = bool(active) or bool(results)
                        batch_cancel.cancel("fan-out sibling failed")
                        await self._settle(active)
                        error = result.error.copy()
                        error.details["output_index"] = result.offset
                        error.details["generation_ms"] = result.elapsed_ms
                        if siblings_may_have_run:
                            error.mark_unknown_outcome()
                            error.details["retry_scope"] = "do_not_retry_full_batch"
                        raise error
                    results.append(result)
                    start_next()
        finally:
            if active:
                batch_cancel.cancel("fan-out abandoned")
                for task in active:
                    task.cancel()
                await asyncio.gather(*active, return_exceptions=True)
        results.sort(key=lambda r: r.offset)
        return self._aggregate(request, context.request_id, results, started)

    @staticmethod
    async def _settle(active: set[asyncio.Task[_ChunkResult]]) -> None:
        """Give in-flight siblings the grace period, then stop them; results are discarded."""
        if not active:
            return
        _, still_running = await asyncio.wait(active, timeout=FAILED_SIBLING_GRACE)
        for task in still_running:
            task.cancel()
        await asyncio.gather(*active, return_exceptions=True)
        active.clear()

    async def _run_chunk(
        self,
        request: ImageRequest,
        context: ProviderContext,
        batch_cancel: CancelToken,
        offset: int,
        count: int,
    ) -> _ChunkResult:
        started = time.monotonic()
        chunk_request = request.model_copy(
            update={"parameters": request.parameters.model_copy(update={"n": count})}
        )
        outer = context.events

        async def forward(event: ProviderEventT) -> None:
            if outer is None:
                return
            if isinstance(event, ProgressEvent):
                await outer(event)
            elif isinstance(event, PartialImageEvent) and event.index < count:
                await outer(event.model_copy(update={"index": event.index + offset}))

        chunk_context = ProviderContext(
            request_id=subrequest_id(context.request_id, offset),
            deadline=context.deadline,
            cancellation=batch_cancel,
            events=forward if outer is not None else None,
            inputs=context.inputs,  # loaded once by the engine, shared by every chunk
        )
        with tracing.span(tracing.FANOUT_CHILD, _child_attributes(offset, count)) as span:
            try:
                async with self._permit(context, batch_cancel):
                    response = await self.inner.execute(chunk_request, chunk_context)
            except BridgeError as error:
                describe_failure(span, error)
                return _ChunkResult(offset, count, _elapsed_ms(started), error=error)
            except Exception as exc:  # a provider bug must not strand the batch
                internal = BridgeError(ErrorCode.INTERNAL, "provider failed unexpectedly")
                internal.__cause__ = exc
                describe_failure(span, internal)
                return _ChunkResult(offset, count, _elapsed_ms(started), error=internal)
            describe_answer(span, response)
        return _ChunkResult(offset, count, _elapsed_ms(started), response=response)

    def _aggregate(
        self,
        request: ImageRequest,
        request_id: str,
        results: list[_ChunkResult],
        started: float,
    ) -> ImageResponse:
        policy = request.parameters.failure_policy
        successful: list[ImageResponse] = []
        failures: list[ImageFailure] = []
        for result in results:
            if result.response is not None:
                response = result.response
                indices = sorted(
                    [image.index for image in response.data]
                    + [failure.index for failure in response.failures]
                )
                if indices != list(range(result.count)):
                    raise BridgeError(
                        ErrorCode.PROTOCOL,
                        "fan-out subrequest returned an invalid output set",
                        details={"output_offset": result.offset},
                    )
                for image in response.data:
                    image.index += result.offset
                    if image.generation_ms is None:
                        image.generation_ms = result.elapsed_ms
                for failure in response.failures:
                    failure.index += result.offset
                successful.append(response)
            else:
                assert result.error is not None
                for index in range(result.offset, result.offset + result.count):
                    error = result.error.copy().with_detail("output_index", index)
                    failures.append(
                        ImageFailure(
                            index=index,
                            error=BridgeErrorBody.from_error(error),
                            generation_ms=result.elapsed_ms,
                        )
                    )
        if not successful:
            if failures:
                error = failures[0].error.to_error()
            else:
                error = BridgeError(ErrorCode.UPSTREAM, "all fan-out outputs failed")
            error.details["all_outputs_failed"] = True
            error.details["failed_outputs"] = request.parameters.n
            raise error
        first = successful[0]
        if any(r.provider != first.provider or r.model != first.model for r in successful):
            raise BridgeError(
                ErrorCode.PROTOCOL, "fan-out provider identity changed within one batch"
            )
        warnings = {"emulated_multi_image_fanout"}
        if request.policies.batch_execution is BatchExecution.SEQUENTIAL:
            warnings.add("sequential_multi_image_fanout")
        data = []
        usage: Usage | None = None
        revised_prompt: str | None = None
        attempts = []
        normalizations: list[Normalization] = []
        for response in successful:
            data.extend(response.data)
            attempts.extend(response.attempts)
            normalizations.extend(n for n in response.normalizations if n not in normalizations)
            failures.extend(response.failures)
            warnings.update(response.warnings)
            if revised_prompt is None:
                revised_prompt = response.revised_prompt
            if response.usage is not None:
                usage = _merge_usage(usage, response.usage)
        data.sort(key=lambda image: image.index)
        failures.sort(key=lambda failure: failure.index)
        if failures:
            if policy is not MultiImageFailurePolicy.BEST_EFFORT:
                raise BridgeError(
                    ErrorCode.PROTOCOL,
                    "fan-out provider returned partial failures under fail-fast policy",
                )
            warnings.add("partial_output_failure")
        elapsed = _elapsed_ms(started)
        merged = ImageResponse(
            id=request_id,
            created=int(time.time()),
            provider=first.provider,
            model=first.model,
            requested=copy_parameters(request.parameters),
            effective=copy_parameters(request.parameters),
            normalizations=normalizations,
            attempts=attempts,
            data=data,
            failures=failures,
            revised_prompt=revised_prompt,
            usage=usage,
            session=_merge_sessions(successful),
            timings=Timings(provider_ms=elapsed, total_ms=elapsed),
            warnings=sorted(warnings),
        )
        merge_served(merged, successful)
        return merged


def _child_attributes(offset: int, count: int) -> dict[str, int]:
    return {tracing.FANOUT_OFFSET: offset, tracing.FANOUT_COUNT: count}


def _sum(left: int | None, right: int | None) -> int | None:
    if left is None and right is None:
        return None
    return min((left or 0) + (right or 0), 2**64 - 1)


def _merge_usage(target: Usage | None, value: Usage) -> Usage:
    if target is None:
        return value.model_copy(deep=True)
    counters = dict(target.provider)
    for key, count in value.provider.items():
        counters[key] = min(counters.get(key, 0) + count, 2**64 - 1)
    return Usage(
        input_tokens=_sum(target.input_tokens, value.input_tokens),
        output_tokens=_sum(target.output_tokens, value.output_tokens),
        total_tokens=_sum(target.total_tokens, value.total_tokens),
        provider=counters,
    )


def _merge_sessions(responses: list[ImageResponse]) -> SessionMetadata | None:
    first = responses[0].session
    if first is None:
        return None
    for response in responses[1:]:
        session = response.session
        if session is None or session.key != first.key or session.thread_id != first.thread_id:
            return None
    return first
