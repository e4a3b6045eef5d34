"""Which provider and model make a Responses request's image.

Two names can say it. The image tool's ``model`` (``gpt-image-2`` …) is an image model
name, routed exactly as the Images API routes one (:func:`~imagebridge.server.openai.
model_names.resolve_model`: ``server.openai.models``, then a provider serving it, then the
default route or, under ``unknown_models = "refuse"``, a 400 naming ``tools[i].model``).
Without it, the top-level ``model`` decides: the name an agent's framework sends
(``gpt-5.5``, ``gpt-4.1`` …) is looked up in ``server.openai.responses.models``; a name
there runs on its route; an image model name a provider serves runs there, as on the
Images API; any other name runs on the default route and is only recorded (it names the
chat model that would have called the tool, and the bridge has none), never refused.
The answer's ``model`` repeats the name the client sent; ``imagegen_bridge.model`` says
what made the image.
"""

from __future__ import annotations

from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.openai.responses import ResponsesTranslation
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.registry import ProviderRegistry
from imagebridge.server.openai.model_names import ROUTED, ModelRoute, resolve_model

__all__ = ["route_response"]


def _routed(request: ImageRequest, provider: str | None, model: str | None) -> ImageRequest:
    routing = request.routing.model_copy(update={"provider": provider, "model": model})
    return request.model_copy(update={"routing": routing})


def _served_anywhere(name: str, config: BridgeConfig, registry: ProviderRegistry) -> bool:
    if name in config.server.openai.models:
        return True
    return any(name in provider.descriptor.models for provider in registry.providers())


def route_response(
    translation: ResponsesTranslation,
    request: ImageRequest,
    config: BridgeConfig,
    registry: ProviderRegistry,
) -> ModelRoute:
    """Route ``request`` (the translation's, idempotency applied) as described above."""
    if request.routing.model is not None:  # the image tool's own model
        try:
            route = resolve_model(request, config, registry)
        except BridgeError as error:
            if error.field == "model":
                error.details["field"] = f"{translation.tool_param}.model"
            raise
        normalization = route.normalization
        if normalization is not None and normalization.field == "model":
            normalization = normalization.model_copy(
                update={"field": f"{translation.tool_param}.model"}
            )
        return ModelRoute(route.request, normalization)
    name = translation.body.model
    if name is None:
        return ModelRoute(request)
    explicit = request.routing.provider
    configured = config.server.openai.responses.models.get(name)
    if configured is not None and explicit in (None, configured.provider):
        return ModelRoute(_routed(request, configured.provider, configured.model))
    if _served_anywhere(name, config, registry):
        try:
            route = resolve_model(_routed(request, explicit, name), config, registry)
        except BridgeError:
            return ModelRoute(request)  # not on the chosen provider: only recorded
        normalization = route.normalization
        if normalization is None or normalization.reason == ROUTED:
            return route
    return ModelRoute(request)
