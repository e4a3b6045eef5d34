"""``partial_images`` on OpenAI's streams: an upper bound, as OpenAI treats it.

OpenAI's image streams (the Images API's and the Responses API's) may end before every
preview asked for was sent, so asking a provider that makes fewer previews is not a
mistake there: the request runs with the provider's maximum and the finished answer says
so in a ``clamped_to_provider_range`` normalization of the field the client sent
(``partial_images``, ``tools[0].partial_images``). Elsewhere (the native routes, JSON
answers) the request's compatibility policy decides, as for any parameter.
"""

from __future__ import annotations

from collections.abc import Callable

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import Normalization
from imagebridge.server.state import BridgeState

__all__ = ["PreviewBound"]


class PreviewBound:
    """Wraps a route's request builder: the built request asks the routed provider for at
    most its maximum of previews (:meth:`measure` first looks the maximum up)."""

    def __init__(self, state: BridgeState, build: Callable[[], ImageRequest], field: str) -> None:
        self._state = state
        self._build = build
        self._field = field
        self._maximum: int | None = None
        self.normalization: Normalization | None = None
        """Set when the request was clamped: the answer reports it first."""
        self.allowed = 0
        """The previews the stream sends at most (set once the request is built): a
        backend may send some unasked, and those are not sent."""

    async def measure(self) -> None:
        """The routed provider's preview bound (any failure is the build's to report)."""
        try:
            routed = self._build()
            capabilities = await self._state.runtime.registry.capabilities(
                routed.routing.provider, routed.routing.model
            )
        except BridgeError:
            return
        self._maximum = capabilities.partial_images.max

    def __call__(self) -> ImageRequest:
        built = self._build()
        asked = built.parameters.partial_images
        self.allowed = asked
        if self._maximum is None or asked <= self._maximum:
            return built
        self.normalization = Normalization(
            field=self._field,
            requested=asked,
            effective=self._maximum,
            reason="clamped_to_provider_range",
        )
        self.allowed = self._maximum
        parameters = built.parameters.model_copy(update={"partial_images": self._maximum})
        return built.model_copy(update={"parameters": parameters})
