"""Route selection: which ``(provider, model)`` pairs a request tries, in which order.

The primary is the caller's ``routing.provider``; a request naming none goes to the
transport measured to deliver its large explicit size best when ``routing.prefer`` (or the
config default ``runtime.images.prefer``) says ``honour_size``, else to the registry's
default. The caller's fallbacks follow, and a resolved route never repeats. Whether a
failed route moves on to the next one is :mod:`.fallback`'s decision.
"""

from __future__ import annotations

from imagebridge.contract.enums import RoutingPreference
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.registry import ProviderRegistry
from imagebridge.engine.size_stats import SizeMatchStats
from imagebridge.engine.sizes import size_ask

__all__ = ["HONOUR_SIZE_MIN_EDGE", "Route", "RoutePlanner"]

Route = tuple[str, str | None]
"""A provider name (or alias) and the model asked of it (``None``: its default)."""

HONOUR_SIZE_MIN_EDGE = 1536
"""``honour_size`` routing applies to explicit sizes with a longer edge above this."""


class RoutePlanner:
    """Resolves a request's routes against the registry and the size-match measurements."""

    def __init__(
        self,
        registry: ProviderRegistry,
        size_stats: SizeMatchStats,
        prefer: RoutingPreference = RoutingPreference.DEFAULT,
    ) -> None:
        self.registry = registry
        self.size_stats = size_stats
        self.prefer = prefer
        """``routing.prefer`` for requests that do not say."""

    def routes(self, request: ImageRequest) -> list[Route]:
        """The primary route, then the fallbacks; a duplicate resolved route is refused."""
        routing = request.routing
        preferred = None if routing.provider else self._size_preferred(request)
        primary = routing.provider or preferred or self.registry.default
        routes: list[Route] = [(primary, routing.model)]
        fallbacks = [(route.provider, route.model) for route in routing.fallbacks]
        if preferred is not None:
            # the caller named no provider: its fallbacks follow the preferred transport
            # (not repeating it), then the default it would otherwise have used
            fallbacks = [route for route in fallbacks if route != routes[0]]
            default = (self.registry.default, routing.model)
            if default not in (routes[0], *fallbacks):
                fallbacks.append(default)
        routes.extend(fallbacks)
        seen: set[Route] = set()
        for index, route in enumerate(routes):
            if route in seen:
                raise BridgeError.invalid_request(
                    "provider routing contains a duplicate resolved route",
                    field=f"routing.fallbacks[{index - 1}]",
                    provider=route[0],
                    model=route[1],
                )
            seen.add(route)
        return routes

    def _size_preferred(self, request: ImageRequest) -> str | None:
        """With ``routing.prefer: honour_size`` (or that config default), the transport
        measured to deliver a large explicit size best, for a request naming no provider.

        ``None`` leaves routing as it is: no large explicit size, no measurement yet.
        """
        prefer = request.routing.prefer or self.prefer
        if prefer is not RoutingPreference.HONOUR_SIZE:
            return None
        ask = size_ask(request.parameters)
        if ask is None or ask.size is None or max(ask.size) <= HONOUR_SIZE_MIN_EDGE:
            return None
        names = [self.registry.default, *sorted(set(self.registry.names) - {self.registry.default})]
        return self.size_stats.best(names, ask.tier, request.routing.model)
