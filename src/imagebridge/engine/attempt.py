"""One attempt of a request on one route: the provider's gates, then its own stages.

For one ``(provider, model)`` route: the provider's circuit breaker and admission gate, its
capability document, transparency planning, validation and negotiation against that
document, the plan of an emulated mask, the provider call (under the deadline, the caller's
cancellation and the grace), the response stamped with what was asked and what was done,
then verification and materialization. Which routes a request tries, and whether a failed
one moves on, is the runtime's business (:mod:`.routing`, :mod:`.fallback`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from imagebridge.contract.capabilities import ProviderCapabilities
from imagebridge.contract.enums import Background, RevisedPromptPolicy
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import CompletedEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine import tracing
from imagebridge.engine.admission import AdmissionGate
from imagebridge.engine.breaker import CircuitBreaker
from imagebridge.engine.masking import MaskPlan, check_request_mask, plan_mask_emulation
from imagebridge.engine.materialize import Materializer
from imagebridge.engine.negotiation import copy_parameters, negotiate_request
from imagebridge.engine.operation import Operation, StageGuard, elapsed_ms
from imagebridge.engine.provider import Provider, ProviderContext
from imagebridge.engine.registry import ProviderRegistry
from imagebridge.engine.size_stats import SizeMatchStats
from imagebridge.engine.sizes import SizeReport
from imagebridge.engine.spans import describe_answer, describe_failure
from imagebridge.engine.transparency import prepare_transparency
from imagebridge.engine.validation import (
    RequestLimits,
    validate_negotiated_request,
    validate_request,
)

__all__ = ["RouteResult", "RouteRunner"]

_NEGATIVE_PROMPT_MERGE = "negative_prompt_prompt_merge"


@dataclass(slots=True)
class RouteResult:
    response: ImageResponse
    effective: ImageRequest
    """The request as negotiated for the route (what its sidecars record)."""


class RouteRunner:
    """Runs attempts against the registry's providers, each behind its breaker and gate.

    The runtime owns the breakers, gates and statistics (its snapshots read them); the
    runner is handed them, with the stage guard of the runtime's shutdown.
    """

    def __init__(
        self,
        registry: ProviderRegistry,
        materializer: Materializer,
        *,
        breakers: Mapping[str, CircuitBreaker],
        provider_gates: Mapping[str, AdmissionGate],
        size_stats: SizeMatchStats,
        stages: StageGuard,
        request_limits: RequestLimits,
        mask_feather_px: int,
    ) -> None:
        self.registry = registry
        self.materializer = materializer
        self.breakers = breakers
        self.provider_gates = provider_gates
        self.size_stats = size_stats
        self.stages = stages
        self.request_limits = request_limits
        self.mask_feather_px = mask_feather_px

    async def run(
        self, provider_name: str, model: str | None, request: ImageRequest, op: Operation
    ) -> RouteResult:
        """One attempt of ``request`` on the route ``(provider_name, model)``; a failure
        names the provider (and counts against its breaker). The attempt is one
        ``provider.attempt`` span saying how it ended."""
        attributes = {tracing.PROVIDER: provider_name}
        if model is not None:
            attributes[tracing.MODEL] = model
        with tracing.span(tracing.ATTEMPT, attributes) as span:
            try:
                result = await self._attempt(provider_name, model, request, op)
            except BridgeError as error:
                describe_failure(span, error)
                raise
            describe_answer(span, result.response)
            return result

    async def _attempt(
        self, provider_name: str, model: str | None, request: ImageRequest, op: Operation
    ) -> RouteResult:
        provider = self.registry.resolve(provider_name)
        name = provider.name  # a property that builds the descriptor: read it once
        breaker_permit = self.breakers[name].acquire()
        gate_started = time.monotonic()
        try:
            gate_permit = await self.provider_gates[name].acquire(op.deadline, op.token)
        except BridgeError as error:
            breaker_permit.abandon()
            raise error.with_provider(name) from None
        except BaseException:
            breaker_permit.abandon()
            raise
        queue_ms = elapsed_ms(gate_started)
        try:
            result = await self._admitted(provider, model, request, op, queue_ms)
        except BridgeError as error:
            breaker_permit.finish(error)
            raise error.with_provider(name) from None
        except BaseException:
            breaker_permit.abandon()
            raise
        finally:
            gate_permit.release()
        breaker_permit.finish(None)
        return result

    async def _admitted(
        self,
        provider: Provider,
        model: str | None,
        request: ImageRequest,
        op: Operation,
        queue_ms: int,
    ) -> RouteResult:
        caps: ProviderCapabilities = await self.stages.controlled(
            provider.capabilities(model), op, "request was cancelled during capability discovery"
        )
        name = provider.name
        if caps.provider != name:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "provider capability identity does not match its registry identity",
            )
        routed = request.model_copy(
            update={
                "routing": request.routing.model_copy(
                    update={"provider": name, "model": model, "fallbacks": []}
                )
            }
        )
        prepared = prepare_transparency(routed, caps)
        validate_request(prepared.request, self.request_limits)
        negotiated = negotiate_request(prepared.request, caps)
        effective = negotiated.request
        inputs = op.inputs
        mask_plan: MaskPlan | None = None
        if request.mask is not None:
            check_request_mask(inputs, emulated=negotiated.mask_emulated)
            if negotiated.mask_emulated:
                effective, inputs, mask_plan = await self.stages.controlled(
                    plan_mask_emulation(
                        effective,
                        inputs,
                        feather_px=self.mask_feather_px,
                        limits=self.materializer.limits.image,
                    ),
                    op,
                    "request was cancelled while reading the edit mask",
                )
        provider_started = time.monotonic()
        context = ProviderContext(
            request_id=op.request_id,
            deadline=op.deadline,
            cancellation=op.token,
            events=op.events,
            inputs=inputs,
        )
        merged = any(n.reason == _NEGATIVE_PROMPT_MERGE for n in negotiated.normalizations)
        grown = merged or mask_plan is not None  # the prompt may have grown
        if grown or not provider.validates_requests:
            validate_negotiated_request(
                effective, self.request_limits, negative_prompt_merged=merged
            )
        if op.dispatch is not None:
            op.dispatch.begin()  # from here on the call may be paid for
        response = await self.stages.provider_call(
            provider.execute_negotiated(effective, context, caps), op
        )
        provider_ms = elapsed_ms(provider_started)
        if caps.model is not None and response.model != caps.model:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "provider response model does not match discovered capabilities",
                details={"expected_model": caps.model, "actual_model": response.model},
            )
        response.id = op.request_id
        response.provider = name
        response.requested = copy_parameters(request.parameters)
        response.effective = copy_parameters(effective.parameters)
        if prepared.plan is not None:
            response.effective.background = Background.TRANSPARENT
            response.add_warning("transparent_background_postprocessed")
        response.normalizations[0:0] = [*prepared.normalizations, *negotiated.normalizations]
        if request.policies.revised_prompt is RevisedPromptPolicy.OMIT:
            response.revised_prompt = None
        response.timings.provider_ms = provider_ms
        response.timings.queue_ms = queue_ms
        await context.emit(CompletedEvent(response=response))  # provider done; materializing
        artifact_started = time.monotonic()
        served_model = response.model

        def record_size(report: SizeReport) -> None:
            self.size_stats.record(name, served_model, report.ask.tier, report.matched)

        materialized = await self.stages.controlled(
            self.materializer.materialize(
                response,
                effective,
                prepared.plan,
                owner=op.owner,
                original=request,
                link_base=op.link_base,
                mask=mask_plan,
                keep=op.keep,
                on_transport_size=record_size,
            ),
            op,
            "request was cancelled during output materialization",
            self.stages.delivery_deadline(op),
        )
        materialized.timings.artifact_ms = elapsed_ms(artifact_started)
        return RouteResult(materialized, effective)
