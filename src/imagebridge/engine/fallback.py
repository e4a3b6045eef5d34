"""Fallback policy: whether a failed route may move on, and what the answer says about it.

A failure moves on to the next route only when the upstream call cannot have run or been
billed: never after an unknown outcome or a billed call, never for the caller's own
mistakes (invalid request, permission, safety, cancellation, session, idempotency). A
provider that is unavailable (configuration, authentication, capability, rate limit,
overload) always may; other errors only under ``fallback_policy: on_error``.
:class:`RouteAttempts` records every route tried, so the answer (or the final error)
carries the attempts and says when a fallback served it.
"""

from __future__ import annotations

from imagebridge.contract.enums import FallbackPolicy, ProviderAttemptOutcome
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse, Normalization, ProviderAttempt
from imagebridge.engine.routing import Route

__all__ = ["RouteAttempts", "should_fallback"]

_NEVER_FALLBACK = frozenset(
    {
        ErrorCode.INVALID_REQUEST,
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.SAFETY_REJECTED,
        ErrorCode.CANCELLED,
        ErrorCode.SESSION,
        ErrorCode.IDEMPOTENCY_CONFLICT,
    }
)
_UNAVAILABLE = frozenset(
    {
        ErrorCode.CONFIGURATION,
        ErrorCode.AUTHENTICATION,
        ErrorCode.UNSUPPORTED_CAPABILITY,
        ErrorCode.RATE_LIMITED,
        ErrorCode.OVERLOADED,
    }
)
_ON_ERROR = frozenset(
    {
        ErrorCode.UPSTREAM,
        ErrorCode.PROTOCOL,
        ErrorCode.ARTIFACT,
        ErrorCode.INPUT,
        ErrorCode.INTERNAL,
    }
)


def should_fallback(error: BridgeError, policy: FallbackPolicy) -> bool:
    """Whether a route failure may move on to the next route (never after a billed call)."""
    if error.outcome_unknown or error.code in _NEVER_FALLBACK:
        return False
    if error.details.get("billed") is True:
        return False
    if error.code in _UNAVAILABLE:
        return True
    return policy is FallbackPolicy.ON_ERROR and error.code in _ON_ERROR


class RouteAttempts:
    """The routes one logical request tried, in order, and what they mean for its answer."""

    __slots__ = ("attempts", "request", "routes")

    def __init__(self, request: ImageRequest, routes: list[Route]) -> None:
        self.request = request
        self.routes = routes
        self.attempts: list[ProviderAttempt] = []

    def failed(self, index: int, error: BridgeError, duration_ms: int) -> bool:
        """Record that route ``index`` failed; whether the next route is to be tried."""
        provider, model = self.routes[index]
        self.attempts.append(
            ProviderAttempt(
                provider=provider,
                model=model,
                outcome=ProviderAttemptOutcome.FAILED,
                error_code=error.code,
                duration_ms=duration_ms,
            )
        )
        return index + 1 < len(self.routes) and should_fallback(
            error, self.request.routing.fallback_policy
        )

    def succeeded(self, index: int, response: ImageResponse, duration_ms: int) -> None:
        """Record that route ``index`` answered ``response``, and say so in it: the calls
        the provider itself retried, the fallback that served it, the attempts."""
        # calls the provider itself retried elsewhere (e.g. a refused carrier model)
        inner = list(response.attempts)
        self.attempts.extend(inner)
        self.attempts.append(
            ProviderAttempt(
                provider=response.provider,
                model=response.model,
                outcome=ProviderAttemptOutcome.SUCCEEDED,
                duration_ms=duration_ms,
            )
        )
        if index > 0:
            response.normalizations.insert(
                0,
                Normalization(
                    field="routing.provider",
                    requested=self.routes[0][0],
                    effective=response.provider,
                    reason="provider_fallback",
                ),
            )
            response.add_warning("provider_fallback_used")
        if self.request.routing.fallbacks or inner:
            response.attempts = self.attempts

    def attach(self, error: BridgeError) -> BridgeError:
        """``error``, carrying every attempt so far in ``details.attempts``."""
        error.details["attempts"] = [attempt.model_dump(mode="json") for attempt in self.attempts]
        return error
