"""The runtime: one logical request in, bounded upstream calls out.

Order of a request: validate → idempotency → global admission → input images (loaded and
verified once, through the input port) → for each route (primary, then fallbacks): breaker →
provider admission → capabilities → transparency planning → negotiation → provider (with
deadline, cancellation and grace) → verification and materialization. A failure whose
upstream outcome is unknown is never retried or rerouted.

The runtime coordinates one logical request and its lifecycle; the rest are their own
modules: which routes a request tries (:mod:`.routing`), one attempt on a route
(:mod:`.attempt`), whether a failed attempt moves on and what the answer says about it
(:mod:`.fallback`), and how each stage runs under the deadline, the caller's cancellation
and shutdown (:mod:`.operation`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from imagebridge.contract.enums import RoutingPreference
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import ProgressEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine import tracing
from imagebridge.engine.admission import AdmissionGate, GateLimits
from imagebridge.engine.attempt import RouteRunner
from imagebridge.engine.breaker import BreakerConfig, CircuitBreaker
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.fallback import RouteAttempts
from imagebridge.engine.idempotency import (
    IdempotencyConfig,
    IdempotencyCoordinator,
    IdempotencyLease,
    request_fingerprint,
)
from imagebridge.engine.inputs import ImageInputLoader, LoadedInputs, load_request_inputs
from imagebridge.engine.keep import KeptImages, ProviderDispatch
from imagebridge.engine.masking import DEFAULT_FEATHER_PX
from imagebridge.engine.materialize import Materializer
from imagebridge.engine.operation import Operation, StageGuard, elapsed_ms
from imagebridge.engine.provider import EventSink
from imagebridge.engine.registry import ProviderRegistry
from imagebridge.engine.routing import RoutePlanner
from imagebridge.engine.size_stats import DEFAULT_WINDOW, SizeMatchStats
from imagebridge.engine.validation import RequestLimits, validate_request
from imagebridge.imaging.ids import uuid7

__all__ = ["ExecutionContext", "ImageRuntime", "ImageRuntimeSettings", "is_valid_request_id"]

_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def is_valid_request_id(value: str) -> bool:
    return _REQUEST_ID_RE.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class ImageRuntimeSettings:
    default_timeout_ms: int = 300_000
    cancellation_grace_ms: int = 1_000
    shutdown_grace_ms: int = 10_000
    request_limits: RequestLimits = field(default_factory=RequestLimits)
    global_gate: GateLimits = field(default_factory=GateLimits)
    provider_default_gate: GateLimits = field(default_factory=GateLimits)
    provider_gates: Mapping[str, GateLimits] = field(default_factory=dict)
    breaker: BreakerConfig = field(default_factory=BreakerConfig)
    breakers: Mapping[str, BreakerConfig] = field(default_factory=dict)
    idempotency: IdempotencyConfig = field(default_factory=IdempotencyConfig)
    mask_feather_px: int = DEFAULT_FEATHER_PX
    size_match_window: int = DEFAULT_WINDOW
    prefer: RoutingPreference = RoutingPreference.DEFAULT
    """``routing.prefer`` for requests that do not say (config ``runtime.images.prefer``)."""


@dataclass(slots=True)
class ExecutionContext:
    """Who is asking and how to reach them: ids, scopes, cancellation and events."""

    request_id: str | None = None
    idempotency_scope: str = "default"
    owner: str = "anonymous-local"
    cancellation: CancelToken | None = None
    events: EventSink | None = None
    link_base: str | None = None
    """The caller's base address of the bridge (``http://host:port/``), for ``url`` outputs
    when ``artifacts.public_base_url`` is not configured."""
    dispatch: ProviderDispatch | None = None
    """Set by the engine when the request's first provider call begins (the server's
    disconnect policy reads it: :mod:`imagebridge.engine.keep`)."""
    keep: KeptImages | None = None
    """Publish every output as an artifact under ``owner`` whatever the response format,
    and record each here (a synchronous request's history record)."""


class ImageRuntime:
    """Executes image requests against a provider registry.

    ``inputs`` is the input port: every input image of a request is loaded through it.
    """

    def __init__(
        self,
        registry: ProviderRegistry,
        materializer: Materializer,
        settings: ImageRuntimeSettings | None = None,
        *,
        inputs: ImageInputLoader,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        settings = settings or ImageRuntimeSettings()
        limits = settings.request_limits
        if not 0 < settings.default_timeout_ms <= limits.max_timeout_ms:
            raise BridgeError(ErrorCode.CONFIGURATION, "default timeout is out of range")
        if not 0 < settings.cancellation_grace_ms <= 30_000:
            raise BridgeError(ErrorCode.CONFIGURATION, "cancellation grace is out of range")
        if not 0 < settings.shutdown_grace_ms <= 300_000:
            raise BridgeError(ErrorCode.CONFIGURATION, "shutdown grace is out of range")
        for name in [*settings.provider_gates, *settings.breakers]:
            if name not in registry.names:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    "limits name a provider that is not registered",
                    details={"provider": name},
                )
        self.registry = registry
        self.materializer = materializer
        self.inputs = inputs
        self.settings = settings
        self.global_gate = AdmissionGate.limited("global", settings.global_gate)
        self.provider_gates: dict[str, AdmissionGate] = {}
        self.breakers: dict[str, CircuitBreaker] = {}
        for name in registry.names:
            gate = settings.provider_gates.get(name, settings.provider_default_gate)
            self.provider_gates[name] = AdmissionGate.limited(f"provider:{name}", gate)
            breaker = settings.breakers.get(name, settings.breaker)
            self.breakers[name] = CircuitBreaker(name, breaker, clock)
        self.idempotency = IdempotencyCoordinator(settings.idempotency)
        self.size_stats = SizeMatchStats(settings.size_match_window)
        self.routing = RoutePlanner(registry, self.size_stats, settings.prefer)
        self._shutdown = CancelToken()
        self._stages = StageGuard(self._shutdown, settings.cancellation_grace_ms)
        self._runner = RouteRunner(
            registry,
            materializer,
            breakers=self.breakers,
            provider_gates=self.provider_gates,
            size_stats=self.size_stats,
            stages=self._stages,
            request_limits=settings.request_limits,
            mask_feather_px=settings.mask_feather_px,
        )
        self._active = 0
        self._drained: asyncio.Event | None = None
        self._shutdown_result: asyncio.Future[None] | None = None

    # -- public API ------------------------------------------------------------------------

    @property
    def shutting_down(self) -> bool:
        return self._shutdown.cancelled

    def queue_snapshot(self) -> dict[str, Any]:
        return {
            "global_queued": self.global_gate.queued,
            "providers_queued": {name: gate.queued for name, gate in self.provider_gates.items()},
        }

    def breaker_snapshot(self) -> dict[str, dict[str, Any]]:
        return {name: breaker.snapshot() for name, breaker in self.breakers.items()}

    async def execute(
        self, request: ImageRequest, context: ExecutionContext | None = None
    ) -> ImageResponse:
        """Run one logical request to a verified response or one precise error."""
        context = context or ExecutionContext()
        if self.shutting_down:
            raise BridgeError(ErrorCode.CANCELLED, "runtime is shutting down")
        self._enter()
        try:
            if self.shutting_down:
                raise BridgeError(ErrorCode.CANCELLED, "runtime is shutting down")
            return await self._execute(request, context)
        finally:
            self._leave()

    async def shutdown(self) -> None:
        """Cancel everything, drain within the grace, then release providers (idempotent)."""
        if self._shutdown_result is not None:
            await asyncio.shield(self._shutdown_result)
            return
        self._shutdown_result = asyncio.get_running_loop().create_future()
        try:
            await self._do_shutdown()
        except BridgeError as error:
            self._shutdown_result.set_exception(error)
            raise
        except BaseException:
            self._shutdown_result.set_result(None)
            raise
        self._shutdown_result.set_result(None)

    # -- lifecycle ---------------------------------------------------------------------------

    def _enter(self) -> None:
        self._active += 1

    def _leave(self) -> None:
        self._active -= 1
        if self._active == 0 and self._drained is not None:
            self._drained.set()

    async def _do_shutdown(self) -> None:
        self._shutdown.cancel("shutdown")
        self.global_gate.close()
        for gate in self.provider_gates.values():
            gate.close()
        drain_error: BridgeError | None = None
        if self._active:
            self._drained = asyncio.Event()
            try:
                await asyncio.wait_for(self._drained.wait(), self.settings.shutdown_grace_ms / 1000)
            except TimeoutError:
                drain_error = BridgeError(
                    ErrorCode.TIMEOUT,
                    "runtime shutdown grace elapsed with active operations",
                    retryable=True,
                )
        first_error: BridgeError | None = drain_error
        for provider in self.registry.providers():
            try:
                await provider.shutdown()
            except BridgeError as error:
                first_error = first_error or error
        if first_error is not None:
            raise first_error

    # -- the pipeline --------------------------------------------------------------------------

    async def _execute(self, request: ImageRequest, context: ExecutionContext) -> ImageResponse:
        validate_request(request, self.settings.request_limits)
        await self.materializer.check_delivery(request, context.link_base)
        request_id = context.request_id
        if request_id is None:
            request_id = str(uuid7())
        elif not is_valid_request_id(request_id):
            raise BridgeError.invalid_request("request ID is invalid")
        timeout_ms = request.timeout_ms or self.settings.default_timeout_ms
        deadline = Deadline.after(timeout_ms / 1000)
        external = context.cancellation or CancelToken()
        token = self._shutdown.child()
        unlink = external.on_cancel(lambda: token.cancel("cancelled"))
        operation = Operation(
            request_id,
            deadline,
            token,
            external,
            context.events,
            context.owner,
            link_base=context.link_base,
            dispatch=context.dispatch,
            keep=context.keep,
        )
        try:
            key = request.idempotency_key
            if key is None:
                return await self._execute_leader(request, operation)
            begun = await self.idempotency.begin(
                context.idempotency_scope, key, request_fingerprint(request), deadline, external
            )
            if isinstance(begun, ImageResponse):
                return begun
            return await self._lead(begun, request, operation)
        finally:
            unlink()

    async def _lead(
        self, lease: IdempotencyLease, request: ImageRequest, operation: Operation
    ) -> ImageResponse:
        try:
            response = await self._execute_leader(request, operation)
        except BridgeError as error:
            self.idempotency.fail(lease, error)
            raise
        except BaseException:
            abandoned = BridgeError(
                ErrorCode.CANCELLED, "request was abandoned while the provider may have run"
            ).mark_unknown_outcome()
            self.idempotency.fail(lease, abandoned)
            raise
        self.idempotency.complete(lease, response)
        return response

    async def _execute_leader(self, request: ImageRequest, op: Operation) -> ImageResponse:
        started = time.monotonic()
        global_permit = await self.global_gate.acquire(op.deadline, op.token)
        try:
            global_queue_ms = elapsed_ms(started)
            routes = self.routing.routes(request)
            input_started = time.monotonic()
            op.inputs = await self._load_inputs(request, op)
            input_ms = elapsed_ms(input_started)
            attempts = RouteAttempts(request, routes)
            last_error: BridgeError | None = None
            for index, (provider_name, model) in enumerate(routes):
                attempt_started = time.monotonic()
                try:
                    routed = await self._runner.run(provider_name, model, request, op)
                except BridgeError as error:
                    last_error = error
                    if attempts.failed(index, error, elapsed_ms(attempt_started)):
                        continue
                    break
                response = routed.response
                attempts.succeeded(index, response, elapsed_ms(attempt_started))
                response.timings.queue_ms += global_queue_ms
                response.timings.input_ms = input_ms
                response.timings.total_ms = elapsed_ms(started)
                if not request.output.metadata.writes_sidecar:
                    return response  # what attach_sidecars would return, without a task
                try:
                    return await self._stages.controlled(
                        self.materializer.attach_sidecars(response, request, routed.effective),
                        op,
                        "request was cancelled while writing metadata sidecars",
                        self._stages.delivery_deadline(op),
                    )
                except BridgeError as error:  # the original dropped the attempts here
                    attempts.attach(error)
                    raise
            assert last_error is not None
            raise attempts.attach(last_error)
        finally:
            global_permit.release()

    async def _load_inputs(self, request: ImageRequest, op: Operation) -> LoadedInputs:
        """Every input image of the request, loaded and verified through the input port.

        Here, once per logical request: after validation (a malformed request costs no
        read or fetch) and after global admission (the global gate bounds how many
        requests hold input bytes at once, so memory stays within its limit times the
        per-request input bounds), and before the first route, so fallback routes and
        fan-out chunks share the same verified bytes (a remote URL is fetched once) and
        no provider admission slot is held while a slow URL is fetched. Each provider
        then holds the loaded images to its own bounds.
        """
        if not request.all_inputs():
            return LoadedInputs()
        if op.events is not None:
            with contextlib.suppress(Exception):  # a failing sink never fails the request
                await op.events(ProgressEvent(stage="loading_inputs"))
        with tracing.span(tracing.INPUTS, {tracing.IMAGES: len(request.all_inputs())}):
            return await self._stages.controlled(
                load_request_inputs(request, self.inputs),
                op,
                "request was cancelled while loading input images",
            )
